// What a queue accepts: the bounds and name checks that the option checks (resolve-options.ts)
// share with the queue (lib/queue re-exports them from queue.constants.ts and queue-keys.ts), here
// below both, so that the module options never import the queue folder.
import { describeValue } from '../errors/describe-value';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { QueueError } from '../errors/queue.error';
import { notWellFormed, utf8BytesOver } from './validate';

/** Most ids one `enqueue` takes, and most tasks one `pop`/`top`/`claim`/`deadLetters` returns. */
export const MAX_QUEUE_BATCH = 1_000;

/** Longest queue name accepted, in bytes (UTF-8). */
export const MAX_QUEUE_NAME_BYTES = 512;

/** Largest `maxAttempts` accepted. */
export const MAX_ATTEMPTS = 1_000_000;

/** Largest worker `concurrency` accepted. */
export const MAX_CONCURRENCY = 10_000;

/** Throws a `QueueError` naming `queue` unless `name` is a usable queue name. */
export function checkQueueName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0) {
    throw QueueError.invalid('queue', name, 'a non-empty string');
  }
  return checkNameBytes('queue', name);
}

/**
 * `checkQueueName` for an option that lists queues (the dashboard's `queues`, `runUntilIdle`'s):
 * a name every queue call would refuse is a `RedisLockOptionsError` naming `option`.
 */
export function checkQueueNameOption(option: string, name: unknown): string {
  try {
    return checkQueueName(name);
  } catch {
    throw new RedisLockOptionsError(
      option,
      name,
      `a queue name (a non-empty, well-formed string of at most ${MAX_QUEUE_NAME_BYTES} bytes)`,
    );
  }
}

/**
 * Throws a `QueueError` naming `argument` (its size and the limit) when `name` is longer than
 * `limit` UTF-8 bytes (default `MAX_QUEUE_NAME_BYTES`, 512: queue names, task, group and
 * deduplication ids), or holds a lone surrogate; `at` says where it is (` at index 3`).
 */
export function checkNameBytes(
  argument: string,
  name: string,
  limit = MAX_QUEUE_NAME_BYTES,
  at = '',
): string {
  const bytes = utf8BytesOver(name, limit);
  if (bytes !== undefined) {
    throw new QueueError(
      `invalid argument '${argument}': ${describeValue(name)}${at} is ${bytes} bytes long; the limit is ${limit}`,
      argument,
    );
  }
  const malformed = notWellFormed(`invalid argument '${argument}':`, name, at);
  if (malformed) throw new QueueError(malformed, argument);
  return name;
}
