import { QueueError } from '../errors/queue.error';
import type { EnqueueOptions } from '../interfaces/queue-options.interface';
import type { TaskOwnOptions } from '../interfaces/queue-task.interface';
import {
  checkBackoff,
  checkTaskName,
  checkTimeoutMs,
  checkWaitForReplicas,
  type ResolvedQueueDefaults,
} from '../options/resolve-options';
import { checkInt, checkKnownKeys } from '../options/validate';
import {
  checkDelay,
  checkExpiry,
  checkGroup,
  checkOptionKeys,
  checkPayloadBytes,
  checkPriority,
  serializePayload,
} from './queue-arguments';
import { checkNameBytes } from './queue-keys';
import { storedOwnOptions, type StoredTaskOptions } from './queue-replies';
import type { EnqueueArgs } from './interfaces/queue-store.interface';
import { MAX_ATTEMPTS, MAX_DELAY_MS } from './queue.constants';

/**
 * `enqueue`'s options, checked and normalized in one place (the building blocks — a delay, a
 * priority, a backoff — come from queue-arguments.ts and the option checks): what enqueue.lua is
 * given besides the ids, with the payload's JSON text as `payload` (undefined for none), which the
 * caller replaces by the stored field (`storedPayload`, with its trace context). One object of one
 * shape on every call: enqueue's hot path reads it (no rest/spread copies, measured 3 µs per task).
 * @throws QueueError naming the offending option; PayloadTooLargeError past the queue's
 *   `maxPayloadBytes`
 */
export function resolveEnqueueOptions(
  defaults: ResolvedQueueDefaults,
  queue: string,
  ids: readonly string[],
  options: EnqueueOptions | undefined,
): EnqueueArgs {
  const o = checkOptionKeys(options, ENQUEUE_OPTIONS);
  if (o.replace !== undefined && typeof o.replace !== 'boolean') {
    throw QueueError.invalid('replace', o.replace, 'true or false');
  }
  let delayMs = o.delayMs === undefined ? 0 : checkDelay('delayMs', o.delayMs);
  let replace = o.replace === true;
  if (o.debounceMs !== undefined) {
    if (o.delayMs !== undefined || o.replace !== undefined) {
      throw QueueError.invalid('debounceMs', o.debounceMs, 'no delayMs or replace beside it');
    }
    delayMs = checkDelay('debounceMs', o.debounceMs);
    replace = true;
  }
  const priority = o.priority === undefined ? 0 : checkPriority(o.priority);
  const group = o.group === undefined ? '' : checkGroup(o.group);
  if (group && priority !== 0) {
    throw QueueError.invalid('priority', o.priority, 'no priority on a task with a group');
  }
  const lifo = checkLifo(o.lifo, delayMs, replace, priority, group);
  const dedup =
    o.deduplication === undefined
      ? undefined
      : checkDedup(o.deduplication, ids, priority === 0 && group === '' && !replace && !lifo);
  const opts = storedOwnOptions(checkOwnOptions(o));
  const waitForReplicas = checkWaitForReplicas(
    'waitForReplicas',
    o.waitForReplicas,
    QueueError.invalid,
  );
  const json = serializePayload(o.payload);
  if (json !== undefined) checkPayloadBytes(defaults, queue, 'payload', json);
  return { delayMs, replace, payload: json, priority, group, opts, waitForReplicas, lifo, dedup };
}

/** `enqueue`'s `lifo`: only for plain tasks due now (the others are not in one FIFO line). */
function checkLifo(
  lifo: unknown,
  delayMs: number,
  replace: boolean,
  priority: number,
  group: string,
): boolean {
  if (lifo === undefined || lifo === false) return false;
  if (lifo !== true) throw QueueError.invalid('lifo', lifo, 'true or false');
  if (delayMs !== 0 || replace || priority !== 0 || group !== '') {
    throw QueueError.invalid(
      'lifo',
      lifo,
      'no delayMs, debounceMs, replace, priority or group beside it',
    );
  }
  return true;
}

/** `enqueue`'s `deduplication`: `{ id, ttlMs? }`, with a single task id. */
function checkDedup(
  value: unknown,
  ids: readonly string[],
  plainLine: boolean,
): { id: string; ttlMs: number; keepLastIfActive: boolean } {
  const d = value as { id?: unknown; ttlMs?: unknown };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw QueueError.invalid('deduplication', value, 'an object { id, ttlMs? }');
  }
  checkKnownKeys('deduplication', value, ['id', 'ttlMs', 'keepLastIfActive'], QueueError.invalid);
  const keep = (value as { keepLastIfActive?: unknown }).keepLastIfActive;
  if (keep !== undefined && typeof keep !== 'boolean') {
    throw QueueError.invalid('deduplication.keepLastIfActive', keep, 'true or false');
  }
  if (typeof d.id !== 'string' || d.id.length === 0) {
    throw QueueError.invalid('deduplication.id', d.id, 'a non-empty string of at most 512 bytes');
  }
  checkNameBytes('deduplication.id', d.id);
  const ttlMs =
    d.ttlMs === undefined
      ? 0
      : checkInt('deduplication.ttlMs', d.ttlMs, 1, MAX_DELAY_MS, QueueError.invalid);
  if (ids.length !== 1) {
    throw QueueError.invalid('deduplication', value, 'a single task id beside it');
  }
  if (keep && (d.ttlMs !== undefined || !plainLine)) {
    throw QueueError.invalid(
      'deduplication.keepLastIfActive',
      keep,
      'no ttlMs, priority, group, replace or lifo beside it',
    );
  }
  return { id: d.id, ttlMs, keepLastIfActive: keep === true };
}

/**
 * A task's name, own failure policy, timeout and deadline from enqueue (or flow node) options;
 * throws `QueueError` naming the option, as every other argument of a queue call (docs/queue.md).
 */
export function checkOwnOptions(o: {
  name?: unknown;
  maxAttempts?: unknown;
  backoff?: unknown;
  timeoutMs?: unknown;
  expiresInMs?: unknown;
  expiresAt?: unknown;
}): StoredTaskOptions {
  const expiresAt = checkExpiry(o.expiresInMs, o.expiresAt);
  // One literal of one shape (no spreads of optional parts): every enqueue runs this.
  return {
    expiresAt,
    name: o.name === undefined ? undefined : checkTaskName('name', o.name, QueueError.invalid),
    maxAttempts:
      o.maxAttempts === undefined
        ? undefined
        : checkInt('maxAttempts', o.maxAttempts, 1, MAX_ATTEMPTS, QueueError.invalid),
    backoff:
      o.backoff === undefined
        ? undefined
        : (checkBackoff('backoff', o.backoff, QueueError.invalid) as TaskOwnOptions['backoff']),
    timeoutMs:
      o.timeoutMs === undefined
        ? undefined
        : checkTimeoutMs('timeoutMs', o.timeoutMs, QueueError.invalid),
  };
}

/** The options `enqueue` accepts. */
const ENQUEUE_OPTIONS = [
  'name',
  'delayMs',
  'payload',
  'replace',
  'priority',
  'group',
  'debounceMs',
  'maxAttempts',
  'backoff',
  'timeoutMs',
  'waitForReplicas',
  'lifo',
  'deduplication',
  'expiresInMs',
  'expiresAt',
];
