import { LockKeyError } from '../errors/lock-key.error';
import { describeValue } from '../errors/describe-value';
import { clusterKeySlot } from '../redis/cluster-slot';

/** Longest lock name accepted, in bytes (UTF-8). */
export const MAX_KEY_BYTES = 512;

/** The Redis keys and channel of one lock; all share one hash tag, so one Cluster slot. */
export interface LockRedisKeys {
  /** The lock name as the user gave it. */
  name: string;
  /** String holding the owner's token, with the lock's TTL. */
  value: string;
  /** Fencing counter (never expires). */
  fence: string;
  /** ZSET: fair waiters in arrival order. */
  line: string;
  /** HASH: fair waiter token -> "deadline:ttl:fencing". */
  entries: string;
  /** Pub/sub channel on which releases are announced. */
  channel: string;
}

/**
 * True when Redis would hash `key` by a `{tag}` inside it: the first `{` followed later by a `}`
 * with at least one character between them.
 */
export function hasHashTag(key: string): boolean {
  const open = key.indexOf('{');
  if (open < 0) return false;
  const close = key.indexOf('}', open + 1);
  return close > open + 1;
}

/** Throws `LockKeyError` unless `name` is a usable lock name. */
export function checkLockName(name: unknown): string {
  if (typeof name !== 'string') {
    throw new LockKeyError(`lock key must be a string, got ${describeValue(name)}`, name);
  }
  if (name.length === 0) throw new LockKeyError('lock key must not be empty', name);
  const bytes = Buffer.byteLength(name);
  if (bytes > MAX_KEY_BYTES) {
    throw new LockKeyError(
      `lock key ${describeValue(name)} is ${bytes} bytes long; the limit is ${MAX_KEY_BYTES}`,
      name,
    );
  }
  return name;
}

/** Validates `key | key[]` and returns the distinct names, in order. */
export function checkLockNames(key: unknown): string[] {
  if (Array.isArray(key)) {
    if (key.length === 0) throw new LockKeyError('lock key list must not be empty', key);
    const names = key.map(checkLockName);
    const distinct = [...new Set(names)];
    if (distinct.length !== names.length) {
      throw new LockKeyError(`lock key list has duplicates: ${names.join(', ')}`, key);
    }
    return distinct;
  }
  return [checkLockName(key)];
}

/**
 * Keys of lock `name`: `<prefix>lock:{<name>}` and suffixes of it. A name that already has a
 * `{tag}` keeps it, so that locks sharing a tag share a Cluster slot (needed for multi-key locks).
 */
export function lockRedisKeys(prefix: string, name: string): LockRedisKeys {
  const value = `${prefix}lock:${hasHashTag(name) ? name : `{${name}}`}`;
  return {
    name,
    value,
    fence: `${value}:fence`,
    line: `${value}:line`,
    entries: `${value}:entries`,
    channel: `${value}:released`,
  };
}

/**
 * On Redis Cluster a multi-key lock runs as one script, so all its keys must live in one hash
 * slot: throws `LockKeyError` naming each key and its slot when they do not.
 */
export function checkOneSlot(keys: readonly LockRedisKeys[]): void {
  if (keys.length < 2) return;
  const slots = keys.map((k) => clusterKeySlot(k.value));
  if (slots.every((slot) => slot === slots[0])) return;
  throw new LockKeyError(
    `lock keys ${keys.map((k, i) => `${describeValue(k.name)} (slot ${slots[i]})`).join(', ')} ` +
      'map to different Redis Cluster slots; a multi-key lock needs one slot: give the keys a ' +
      "common hash tag, e.g. '{order:42}:stock' and '{order:42}:payment'",
    keys.map((k) => k.name),
  );
}
