import { checkKeyName } from '../lock/lock-keys';
import { taggedKey } from '../redis/tagged-key';

/** The Redis keys and channel of one semaphore; all share one hash tag, so one Cluster slot. */
export interface SemaphoreRedisKeys {
  /** The semaphore name as the user gave it. */
  name: string;
  /** ZSET: holder token -> expiry (ms, Redis clock). */
  holders: string;
  /** HASH: limit, used, fence, and each holder's "permits:fence". */
  meta: string;
  /** ZSET: waiting tokens in arrival order. */
  line: string;
  /** HASH: waiting token -> "deadline:ttl:permits". */
  entries: string;
  /** Pub/sub channel on which grants to waiters are announced. */
  channel: string;
}

/**
 * Keys of semaphore `name`: `<prefix>sem:{<name>}` and suffixes of it (`encodeKeyName`: a
 * name with a `{tag}` keeps it). Throws `LockKeyError` for an empty or too long name.
 */
export function semaphoreRedisKeys(prefix: string, name: string): SemaphoreRedisKeys {
  const holders = taggedKey(prefix, 'sem', checkKeyName(name, 'semaphore key'));
  return {
    name,
    holders,
    meta: `${holders}:meta`,
    line: `${holders}:line`,
    entries: `${holders}:entries`,
    channel: `${holders}:granted`,
  };
}

/** The five KEYS every semaphore script takes for one semaphore, in their order. */
export function semaphoreScriptKeys(k: SemaphoreRedisKeys): string[] {
  return [k.holders, k.meta, k.line, k.entries, k.channel];
}
