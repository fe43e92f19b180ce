import type { LeasedTask, QueueTaskInfo, QueueTaskState, Task } from './interfaces/task.interface';
import { parsePayload, storedTrace } from './queue-arguments';

type Reply = (string | number | null)[];

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
 * payload, enqueuedAt, ...}.
 */
export function toLeasedTasks<P>(
  queue: string,
  reply: Reply,
  from: number,
  leaseMs: number,
): LeasedTask<P>[] {
  const now = Number(reply[0]);
  const tasks: LeasedTask<P>[] = [];
  for (let i = from; i < reply.length; i += 6) {
    const enqueuedAt = reply[i + 5];
    const traceparent = storedTrace(reply[i + 4] as string | null);
    tasks.push({
      queue,
      id: String(reply[i]),
      score: Number(reply[i + 1]),
      attempt: Number(reply[i + 2]),
      leaseToken: String(reply[i + 3]),
      leaseExpiresAt: now + leaseMs,
      payload: parsePayload(reply[i + 4] as string | null) as P,
      ...(enqueuedAt === null ? {} : { enqueuedAt: Number(enqueuedAt) }),
      ...(traceparent === undefined ? {} : { traceparent }),
    });
  }
  return tasks;
}

/** Tasks of an inspect reply: {id, state, time, attempts, payload, lastError, info, ...}. */
export function toTaskInfos<P>(queue: string, reply: Reply): QueueTaskInfo<P>[] {
  const infos: QueueTaskInfo<P>[] = [];
  for (let i = 0; i < reply.length; i += 7) {
    const lastError = reply[i + 5];
    // 'enqueuedAt' or 'enqueuedAt|dueAt|priority|seq|group' (the group may contain '|')
    const parts = String(reply[i + 6] ?? '').split('|');
    const [enqueuedAt, , priority] = parts;
    const group = parts.slice(4).join('|');
    infos.push({
      queue,
      id: String(reply[i]),
      state: String(reply[i + 1]) as QueueTaskState,
      time: Number(reply[i + 2]),
      attempts: Number(reply[i + 3]),
      payload: parsePayload(reply[i + 4] as string | null) as P,
      ...(lastError === null ? {} : { lastError: String(lastError) }),
      ...(enqueuedAt ? { enqueuedAt: Number(enqueuedAt) } : {}),
      ...(priority && priority !== '0' ? { priority: Number(priority) } : {}),
      ...(group ? { group } : {}),
    });
  }
  return infos;
}
