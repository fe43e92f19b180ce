import type { LeasedTask, QueueTaskInfo, QueueTaskState, Task } from './interfaces/task.interface';
import type { BackoffOptions, TaskOwnOptions } from './interfaces/task.interface';
import { parsePayload, storedTrace } from './queue-arguments';
import { decodeTaskError } from './task-errors';

/**
 * In place of a payload, result or progress whose JSON text is longer than a list asked to read
 * (`QueueStore.list`'s `cutBytes`, the dashboard's task lists): its size alone.
 */
export class UnreadJson {
  constructor(
    /** The size of the stored value in bytes (a payload's includes its trace context). */
    readonly bytes: number,
  ) {}
}

/** A field inspect.lua did not send: its length, after a result's 'finishedAt|'. */
type UnreadField = [bytes: number] | [finishedAt: string, bytes: number];

/** A kept result ('finishedAt|result JSON', the JSON empty for `undefined`). */
export function storedResult(field: string | UnreadField): {
  finishedAt: number;
  result?: unknown;
} {
  if (typeof field !== 'string') {
    const [prefix, bytes] = field as [string, number];
    return {
      finishedAt: Number(prefix.slice(0, -1)),
      result: new UnreadJson(bytes - prefix.length),
    };
  }
  const bar = field.indexOf('|');
  const json = field.slice(bar + 1);
  return {
    finishedAt: Number(field.slice(0, bar)),
    ...(json === '' ? {} : { result: JSON.parse(json) as unknown }),
  };
}

type Reply = (string | number | null)[];

/** `T` with its fields writable, while one is built. */
type Building<T> = { -readonly [K in keyof T]: T[K] };

/** Tasks of a `pop`/`top` reply: {id, score, payload, ...}. */
export function toTasks<P>(queue: string, reply: Reply): Task<P>[] {
  const tasks: Task<P>[] = [];
  for (let i = 0; i < reply.length; i += 3) {
    tasks.push({
      queue,
      id: String(reply[i]),
      score: Number(reply[i + 1]),
      payload: parsePayload(reply[i + 2] as string | null) as P,
    });
  }
  return tasks;
}

/**
 * Leased tasks of a claim reply ({nowMs, ...}), from index `from`: {id, score, attempt, token,
 * payload, enqueuedAt, fence, opts, parent, ...}.
 */
export function toLeasedTasks<P>(
  queue: string,
  reply: Reply,
  from: number,
  leaseMs: number,
): LeasedTask<P>[] {
  const now = Number(reply[0]);
  const tasks: LeasedTask<P>[] = [];
  for (let i = from; i < reply.length; i += 9) {
    const enqueuedAt = reply[i + 5];
    const opts = reply[i + 7];
    const parent = reply[i + 8];
    const traceparent = storedTrace(reply[i + 4] as string | null);
    // The optional fields are set only when present (no spread of an empty object per task: a
    // drain builds one of these per task).
    const task: Building<LeasedTask<P>> = {
      queue,
      id: String(reply[i]),
      score: Number(reply[i + 1]),
      attempt: Number(reply[i + 2]),
      leaseToken: String(reply[i + 3]),
      leaseExpiresAt: now + leaseMs,
      payload: parsePayload(reply[i + 4] as string | null) as P,
      fence: Number(reply[i + 6]),
    };
    if (enqueuedAt !== null) task.enqueuedAt = Number(enqueuedAt);
    if (opts !== null) Object.assign(task, toStoredOptions(String(opts)));
    if (traceparent !== undefined) task.traceparent = traceparent;
    if (parent !== null) task.parent = toParent(String(parent));
    tasks.push(task);
  }
  return tasks;
}

/** A child's stored link to its flow parent ({q, p, ...}, includes/flow.lua) as its queue and id. */
function toParent(json: string): { queue: string; id: string } {
  const link = JSON.parse(json) as { q: string; p: string };
  return { queue: link.q, id: link.p };
}

/**
 * The stored JSON of a task's own options ({m, b, t, x, n}) as the task's `options` (when it has
 * any but its name) and `name`.
 */
function toStoredOptions(json: string): { options?: TaskOwnOptions; name?: string } {
  const o = JSON.parse(json) as {
    m?: number;
    b?: BackoffOptions;
    t?: number;
    x?: number;
    n?: string;
  };
  const own =
    o.m === undefined && o.b === undefined && o.t === undefined && o.x === undefined
      ? undefined
      : {
          ...(o.m === undefined ? {} : { maxAttempts: o.m }),
          ...(o.b === undefined ? {} : { backoff: o.b }),
          ...(o.t === undefined ? {} : { timeoutMs: o.t }),
          ...(o.x === undefined ? {} : { expiresAt: o.x }),
        };
  return {
    ...(own === undefined ? {} : { options: own }),
    ...(o.n === undefined ? {} : { name: o.n }),
  };
}

/** What is stored per task in the queue's `opts` hash: its own options and its name. */
export type StoredTaskOptions = TaskOwnOptions & { readonly name?: string };

/** The stored JSON of a task's own options and name, or '' when it has none. */
export function storedOwnOptions(o: StoredTaskOptions): string {
  if (
    o.maxAttempts === undefined &&
    o.backoff === undefined &&
    o.timeoutMs === undefined &&
    o.expiresAt === undefined &&
    o.name === undefined
  )
    return '';
  // "x" (the deadline) is read by the scripts (includes/expiry.lua), "n" (the name) by claim.lua.
  return JSON.stringify({
    m: o.maxAttempts,
    b: o.backoff,
    t: o.timeoutMs,
    x: o.expiresAt,
    n: o.name,
  });
}

/**
 * Tasks of an inspect reply: {id, state, time, attempts, payload, lastError, info, result,
 * progress, opts, ...}.
 */
export function toTaskInfos<P>(
  queue: string,
  reply: (string | number | null | UnreadField)[],
): QueueTaskInfo<P>[] {
  const infos: QueueTaskInfo<P>[] = [];
  for (let i = 0; i < reply.length; i += 10) {
    const lastError = reply[i + 5];
    const opts = reply[i + 9];
    const name = opts === null ? undefined : toStoredOptions(String(opts)).name;
    const state = String(reply[i + 1]) as QueueTaskState;
    const result = reply[i + 7] as string | UnreadField | null;
    const payload = reply[i + 4] as string | [bytes: number] | null;
    const progress = reply[i + 8] as string | [bytes: number] | null;
    const error = lastError === null ? undefined : decodeTaskError(String(lastError));
    // 'enqueuedAt' or 'enqueuedAt|dueAt|priority|seq|group' (the group may contain '|')
    const parts = String(reply[i + 6] ?? '').split('|');
    const [enqueuedAt, , priority] = parts;
    const group = parts.slice(4).join('|');
    infos.push({
      queue,
      id: String(reply[i]),
      state,
      ...(name === undefined ? {} : { name }),
      // A plain task's score carries a fraction that orders same-ms enqueues (enqueue.lua).
      time: Math.ceil(Number(reply[i + 2])),
      attempts: Number(reply[i + 3]),
      payload: (Array.isArray(payload) ? new UnreadJson(payload[0]) : parsePayload(payload)) as P,
      ...(error === undefined ? {} : { lastError: error.message, error }),
      ...(enqueuedAt ? { enqueuedAt: Number(enqueuedAt) } : {}),
      ...(priority && priority !== '0' ? { priority: Number(priority) } : {}),
      ...(group ? { group } : {}),
      ...(result === null ? {} : storedResult(result)),
      ...(progress === null
        ? {}
        : {
            progress: Array.isArray(progress)
              ? new UnreadJson(progress[0])
              : (JSON.parse(progress) as unknown),
          }),
      ...(state === 'dead' || state === 'cancelled' || state === 'expired'
        ? { finishedAt: Number(reply[i + 2]) }
        : {}),
    });
  }
  return infos;
}
