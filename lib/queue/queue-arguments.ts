import { describeValue } from '../errors/describe-value';
import { QueueError } from '../errors/queue.error';
import { PayloadTooLargeError } from '../errors/payload-too-large.error';
import type { ResolvedQueueDefaults } from '../options/resolve-options';
import { checkInt, checkKnownKeys, checkMs, utf8BytesOver } from '../options/validate';
import type { LeasedTask } from './interfaces/task.interface';
import { checkNameBytes, checkQueueName } from './queue-keys';
import {
  MAX_ATTEMPTS,
  MAX_DELAY_MS,
  MAX_PRIORITY,
  MAX_QUEUE_BATCH,
  MAX_QUEUE_NAME_BYTES,
  MAX_TASK_LOG_LINE,
} from './queue.constants';

const ID_EXPECTED = 'a non-empty string or a finite number';

/**
 * An id as a string: a non-empty string of at most `limit` UTF-8 bytes, or a finite number; a
 * `QueueError` naming `argument` otherwise (`at`: where it is, ` at index 3`).
 */
function toId(argument: string, id: unknown, limit: number, at = ''): string {
  if (typeof id === 'number' && Number.isFinite(id)) return String(id);
  if (typeof id !== 'string' || id.length === 0) {
    throw new QueueError(
      `invalid argument '${argument}': expected ${ID_EXPECTED}${at}, got ${describeValue(id)}`,
      argument,
    );
  }
  return checkNameBytes(argument, id, limit, at);
}

/**
 * Validates `id | id[]` (at most `MAX_QUEUE_BATCH`, each at most 512 bytes) and returns the ids as
 * strings; one bad id refuses the whole call.
 */
export function checkIds(ids: unknown): string[] {
  if (!Array.isArray(ids)) return [checkTaskId(ids)];
  if (ids.length === 0 || ids.length > MAX_QUEUE_BATCH) {
    throw QueueError.invalid('ids', ids, `an array of 1 to ${MAX_QUEUE_BATCH} ids`);
  }
  return ids.map((id: unknown, i) => toId('ids', id, MAX_QUEUE_NAME_BYTES, ` at index ${i}`));
}

/**
 * Validates one id (a non-empty string of at most `limit` bytes, default 512, or a finite number)
 * and returns it as a string; `argument` names it in the `QueueError`.
 */
export function checkTaskId(id: unknown, argument = 'id', limit = MAX_QUEUE_NAME_BYTES): string {
  return toId(argument, id, limit);
}

/** A batch size: an integer from 1 to `MAX_QUEUE_BATCH`. */
export function checkCount(count: unknown): number {
  return checkInt('count', count, 1, MAX_QUEUE_BATCH, QueueError.invalid);
}

/** A delay: an integer number of ms from 0 to `MAX_DELAY_MS`. */
export function checkDelay(argument: string, value: unknown): number {
  return checkInt(argument, value, 0, MAX_DELAY_MS, QueueError.invalid);
}

/** A lease length: an integer number of ms from 1 to the longest timer Node supports. */
export function checkLeaseMs(argument: string, value: unknown): number {
  return checkMs(argument, value, 1, QueueError.invalid);
}

/** An attempt limit: an integer from 1 to 1,000,000. */
export function checkMaxAttempts(argument: string, value: unknown): number {
  return checkInt(argument, value, 1, MAX_ATTEMPTS, QueueError.invalid);
}

/** Throws unless `value` is a finite number (a score read from `top`/`pop`). */
export function checkScore(value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw QueueError.invalid('score', value, 'a finite number');
  }
  return value;
}

/**
 * A log line as stored (JSON text: no raw newline), cut to 1,000 characters; a `QueueError`
 * naming `line` when it is not a string.
 */
export function logLineJson(line: unknown): string {
  if (typeof line !== 'string') throw QueueError.invalid('line', line, 'a string');
  return JSON.stringify(line.length > MAX_TASK_LOG_LINE ? line.slice(0, MAX_TASK_LOG_LINE) : line);
}

/** Throws a `QueueError` unless `value` is `undefined` or an object with only `known` keys. */
export function checkOptionKeys(value: unknown, known: readonly string[]): Record<string, unknown> {
  if (
    value !== undefined &&
    (value === null || typeof value !== 'object' || Array.isArray(value))
  ) {
    throw QueueError.invalid('options', value, 'an options object');
  }
  return checkKnownKeys('', value, known, QueueError.invalid);
}

/**
 * Throws `PayloadTooLargeError` when `json` (a payload, progress value or log line as it would be
 * stored) is longer than the `maxPayloadBytes` of `queue` in UTF-8 bytes (its own under
 * `queue.queues`, else the module's); returns it. Short text is not counted (`utf8BytesOver`).
 * @param subject whose value it is, for the message (`task 'a'`, `flow node 'q:a'`)
 */
export function checkPayloadBytes(
  defaults: Pick<ResolvedQueueDefaults, 'maxPayloadBytes' | 'queues'>,
  queue: string,
  argument: string,
  json: string,
  subject?: string,
): string {
  const own = defaults.queues.size === 0 ? undefined : defaults.queues.get(queue);
  const limit = own ? own.maxPayloadBytes : defaults.maxPayloadBytes;
  const bytes = utf8BytesOver(json, limit);
  if (bytes === undefined) return json;
  const option = own ? `queue.queues.${queue}.maxPayloadBytes` : 'queue.maxPayloadBytes';
  throw new PayloadTooLargeError(queue, argument, bytes, limit, option, subject);
}

/**
 * The JSON text of a payload, or `undefined` when there is none. Functions, symbols, BigInt,
 * non-finite numbers and cycles are rejected with a `QueueError` naming `payload` (JSON would
 * silently drop or change them).
 */
export function serializePayload(payload: unknown): string | undefined {
  return payload === undefined ? undefined : serializeJson('payload', payload);
}

/**
 * The JSON text of `value` (a payload, a task's result or progress); throws a `QueueError` naming
 * `argument` when it is not a JSON value (functions, symbols, BigInt, non-finite numbers, cycles).
 */
export function serializeJson(argument: string, value: unknown): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value, (key, v: unknown) => {
      if (typeof v === 'function' || typeof v === 'symbol') {
        throw QueueError.invalid(argument, v, `a JSON value (at '${key}')`);
      }
      if (typeof v === 'number' && !Number.isFinite(v)) {
        throw QueueError.invalid(argument, v, `a JSON value (at '${key}')`);
      }
      return v;
    });
  } catch (err) {
    if (err instanceof QueueError) throw err;
    throw new QueueError(
      `invalid argument '${argument}': expected a JSON value, got one that JSON.stringify rejects: ${(err as Error).message}`,
      argument,
    );
  }
  if (json === undefined) throw QueueError.invalid(argument, value, 'a JSON value');
  return json;
}

/**
 * Marks a payload field that starts with the task's trace context (`\u0001<traceparent>\n`, then
 * the JSON text or nothing); JSON text never starts with it. Only traced enqueues write it.
 */
const TRACE_MARK = '\u0001';

/** The payload field to store: the JSON text, preceded by `traceparent` when there is one. */
export function storedPayload(
  json: string | undefined,
  traceparent: string | undefined,
): string | undefined {
  return traceparent === undefined ? json : `${TRACE_MARK}${traceparent}\n${json ?? ''}`;
}

/** The trace context stored with a payload field, if any. */
export function storedTrace(field: string | null | undefined): string | undefined {
  return field?.startsWith(TRACE_MARK) ? field.slice(1, field.indexOf('\n')) : undefined;
}

/** The payload of a stored payload field (JSON text), or `undefined` when the task has none. */
export function parsePayload(field: string | null | undefined): unknown {
  if (field === null || field === undefined) return undefined;
  const json = field.startsWith(TRACE_MARK) ? field.slice(field.indexOf('\n') + 1) : field;
  return json === '' ? undefined : JSON.parse(json);
}

/** Validates a `LeasedTask` handed back to `ack`/`nack`/`extendLease`/`release`. */
export function checkLeasedTask(task: unknown): LeasedTask {
  const t = task as Partial<LeasedTask> | null;
  if (
    typeof t !== 'object' ||
    t === null ||
    typeof t.id !== 'string' ||
    t.id.length === 0 ||
    typeof t.leaseToken !== 'string' ||
    t.leaseToken.length === 0
  ) {
    throw QueueError.invalid(
      'task',
      task,
      'a LeasedTask returned by claim (with id and leaseToken)',
    );
  }
  try {
    checkQueueName(t.queue);
  } catch {
    throw QueueError.invalid('task', task, "a LeasedTask whose 'queue' is a valid queue name");
  }
  return t as LeasedTask;
}

/** A priority: an integer from -1000 (soonest) to 1000. */
export function checkPriority(value: unknown): number {
  return checkInt('priority', value, -MAX_PRIORITY, MAX_PRIORITY, QueueError.invalid);
}

/** A group name: a non-empty string without NUL, at most 512 bytes. */
export function checkGroup(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.includes('\0')) {
    throw QueueError.invalid(
      'group',
      value,
      `a non-empty string without NUL of at most ${MAX_QUEUE_NAME_BYTES} bytes`,
    );
  }
  return checkNameBytes('group', value);
}

/** A page of `list`: `offset` from 0, `limit` from 1 to `MAX_QUEUE_BATCH`. */
export function checkPage(options: unknown): { offset: number; limit: number } {
  const o = checkOptionKeys(options, ['offset', 'limit']);
  return {
    offset:
      o.offset === undefined
        ? 0
        : checkInt('offset', o.offset, 0, Number.MAX_SAFE_INTEGER, QueueError.invalid),
    limit:
      o.limit === undefined
        ? 100
        : checkInt('limit', o.limit, 1, MAX_QUEUE_BATCH, QueueError.invalid),
  };
}

/** A time: a `Date` or epoch ms (a safe integer from 0); `QueueError` naming `argument`. */
export function checkTime(argument: string, value: unknown): number {
  const ms = value instanceof Date ? value.getTime() : value;
  return checkInt(argument, ms, 0, Number.MAX_SAFE_INTEGER, (a, _v, expected) =>
    QueueError.invalid(a, value, expected),
  );
}

/**
 * The deadline of `expiresInMs` (from now, on this process's clock: 1 ms to `MAX_DELAY_MS`) or
 * `expiresAt` (a `Date` or epoch ms, a safe integer from 0; a past one expires the task at its
 * first claim), at most one of them; `undefined` for neither (`QueueError` naming the option).
 */
export function checkExpiry(expiresInMs: unknown, expiresAt: unknown): number | undefined {
  if (expiresInMs !== undefined && expiresAt !== undefined) {
    throw QueueError.invalid('expiresAt', expiresAt, 'no expiresInMs beside it');
  }
  if (expiresInMs !== undefined) {
    return Date.now() + checkInt('expiresInMs', expiresInMs, 1, MAX_DELAY_MS, QueueError.invalid);
  }
  return expiresAt === undefined ? undefined : Math.max(1, checkTime('expiresAt', expiresAt));
}
