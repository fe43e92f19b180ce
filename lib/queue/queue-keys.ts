import { describeValue } from '../errors/describe-value';
import { QueueError } from '../errors/queue.error';
import { taggedKey } from '../redis/tagged-key';
import { MAX_QUEUE_NAME_BYTES } from './queue.constants';

/** The Redis keys of one queue; all share one hash tag, so one Cluster slot. */
export interface QueueRedisKeys {
  /** The queue name as the user gave it. */
  name: string;
  /** ZSET id -> due time (ms): ready (due <= now) and delayed tasks together. */
  due: string;
  /** ZSET id -> lease expiry (ms). */
  leased: string;
  /** HASH id -> JSON payload. */
  payload: string;
  /** HASH id -> number of claims so far. */
  attempts: string;
  /** HASH id -> lease token of the current lease. */
  tokens: string;
  /** ZSET id -> time of death (ms). */
  dead: string;
  /** LIST holding at most one wake-up marker; idle workers block on it. */
  wake: string;
}

/** Throws a `QueueError` naming `queue` unless `name` is a usable queue name. */
export function checkQueueName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0) {
    throw QueueError.invalid('queue', name, 'a non-empty string');
  }
  const bytes = Buffer.byteLength(name);
  if (bytes > MAX_QUEUE_NAME_BYTES) {
    throw new QueueError(
      `invalid argument 'queue': ${describeValue(name)} is ${bytes} bytes long; the limit is ${MAX_QUEUE_NAME_BYTES}`,
      'queue',
    );
  }
  return name;
}

/**
 * Keys of queue `name`: `<prefix>queue:{<name>}:<part>`. A name that already has a `{tag}` keeps
 * it, so that queues sharing a tag share a Cluster slot.
 */
export function queueRedisKeys(prefix: string, name: string): QueueRedisKeys {
  const base = taggedKey(prefix, 'queue', name);
  return {
    name,
    due: `${base}:due`,
    leased: `${base}:leased`,
    payload: `${base}:payload`,
    attempts: `${base}:attempts`,
    tokens: `${base}:tokens`,
    dead: `${base}:dead`,
    wake: `${base}:wake`,
  };
}
