import { LockKeyError } from '../errors/lock-key.error';
import { describeList, describeValue } from '../errors/describe-value';
import { clusterKeySlot, slotTag } from '../redis/cluster-slot';
import { taggedKey } from '../redis/tagged-key';
import { notWellFormed, utf8BytesOver } from '../options/validate';
import { tokenTag } from './lock-tokens';

/** Longest lock name accepted, in bytes (UTF-8). */
export const MAX_KEY_BYTES = 512;

/**
 * The Redis keys and channel of one lock; all share one Cluster slot (the fence counter by a hash
 * tag of that slot, the others by the lock's own tag).
 */
export interface LockRedisKeys {
  /** The lock name as the user gave it. */
  name: string;
  /** String holding the owner's token, with the lock's TTL. */
  value: string;
  /** Fence counter (`FenceScope`); lives `fenceTtlMs` after its creation. */
  fence: string;
  /** ZSET: fair waiters in arrival order. */
  line: string;
  /** HASH: fair waiter token -> "deadline:ttl:fencing". */
  entries: string;
  /** Pub/sub channel on which releases are announced. */
  channel: string;
  /** ZSET: shared (read) holder token -> expiry ms (`mode: 'shared'`). */
  shared: string;
}

/**
 * Throws `LockKeyError` unless `name` is a non-empty string of at most `MAX_KEY_BYTES` bytes,
 * without a lone surrogate; `what` names it in the message (`'lock key'`, `'fenced resource
 * name'`).
 */
export function checkKeyName(name: unknown, what = 'lock key'): string {
  if (typeof name !== 'string') {
    throw new LockKeyError(`${what} must be a string, got ${describeValue(name)}`, name);
  }
  if (name.length === 0) throw new LockKeyError(`${what} must not be empty`, name);
  const bytes = utf8BytesOver(name, MAX_KEY_BYTES);
  if (bytes !== undefined) {
    throw new LockKeyError(
      `${what} ${describeValue(name)} is ${bytes} bytes long; the limit is ${MAX_KEY_BYTES}`,
      name,
    );
  }
  const malformed = notWellFormed(what, name);
  if (malformed) throw new LockKeyError(malformed, name);
  return name;
}

/** Validates `key | key[]` and returns the distinct names, in order. */
export function checkLockNames(key: unknown): string[] {
  if (Array.isArray(key)) {
    if (key.length === 0) throw new LockKeyError('lock key list must not be empty', key);
    const names = key.map((k) => checkKeyName(k));
    const distinct = [...new Set(names)];
    if (distinct.length !== names.length) {
      // Only the repeated names: the list may hold thousands (the error's `key` has it whole).
      const seen = new Set<string>();
      const repeated = new Set<string>();
      for (const name of names) (seen.has(name) ? repeated : seen).add(name);
      throw new LockKeyError(`lock key list has duplicates: ${describeList([...repeated])}`, key);
    }
    return distinct;
  }
  return [checkKeyName(key)];
}

/**
 * Which fence counter a lock uses (docs/locks.md, "Fences"): `'server'` one per key prefix on the
 * server (`<prefix>lock-fence`), `'slot'` on Cluster one per prefix and hash slot
 * (`<prefix>lock-fence:{<slot tag>}`, in the lock's slot), so that counters do not grow with the
 * number of lock names; `'lock'` one per lock (`<value key>:fence`), for quorum mode, whose
 * write-back (`quorum-raise-fence.lua`) is refused by a counter that moved meanwhile.
 */
export type FenceScope = 'server' | 'slot' | 'lock';

/**
 * Keys of lock `name`: `<prefix>lock:{<name>}` and suffixes of it (`encodeKeyName`). A name that
 * already has a `{tag}` keeps it (`<prefix>lock:<name>{}`), so that locks sharing a tag share a
 * Cluster slot (needed for multi-key locks); no name's keys can be another name's keys. `fences`:
 * which fence counter it uses.
 */
export function lockRedisKeys(
  prefix: string,
  name: string,
  fences: FenceScope = 'server',
): LockRedisKeys {
  // The prefix's length first: a separator could occur in the prefix or the name themselves (both
  // may hold any character), and two locks would share keys.
  const id = `${fences}:${prefix.length}:${prefix}${name}`;
  const cached = KEYS_CACHE.get(id);
  if (cached) return cached;
  const keys = makeLockRedisKeys(prefix, name, fences);
  if (KEYS_CACHE.size >= KEYS_CACHED) KEYS_CACHE.delete(KEYS_CACHE.keys().next().value as string);
  KEYS_CACHE.set(id, keys);
  return keys;
}

/** How many lock names keep their keys built (a hot lock builds them once; the oldest go first). */
const KEYS_CACHED = 1_000;
const KEYS_CACHE = new Map<string, LockRedisKeys>();

function makeLockRedisKeys(prefix: string, name: string, fences: FenceScope): LockRedisKeys {
  const value = taggedKey(prefix, 'lock', name);
  return {
    name,
    value,
    fence:
      fences === 'lock'
        ? `${value}:fence`
        : lockFenceKey(prefix, fences === 'slot' ? clusterKeySlot(value) : undefined),
    // The acquire and release scripts name these three after `value` (scripts/lock-keys.lua).
    line: `${value}:line`,
    entries: `${value}:entries`,
    channel: `${value}:released`,
    shared: `${value}:shared`,
  };
}

/**
 * The channel on which a release tells the waiter `token` of the lock with channel `channel` that
 * it was handed the lock ('h …') or woken ('w …'): the lock's channel and the tag of the instance
 * that made the token (`waiterChannel` in hand-over.lua), so that a handoff reaches that instance
 * alone, not every instance waiting for the lock. Same Cluster slot as `channel`. `token` may be
 * the instance's tag itself (its tokens' first 8 characters).
 */
export function waiterChannel(channel: string, token: string): string {
  return `${channel}:${tokenTag(token)}`;
}

/** The fence counter of the locks of `prefix`: the server's (`slot` undefined) or slot `slot`'s. */
export function lockFenceKey(prefix: string, slot?: number): string {
  return slot === undefined ? `${prefix}lock-fence` : `${prefix}lock-fence:{${slotTag(slot)}}`;
}

/**
 * On Redis Cluster a multi-key lock runs as one script, so all its keys must live in one hash
 * slot: throws `LockKeyError` naming the first key of each slot (the first few slots) when they
 * do not.
 */
export function checkOneSlot(keys: readonly LockRedisKeys[]): void {
  if (keys.length < 2) return;
  const slots = keys.map((k) => clusterKeySlot(k.value));
  if (slots.every((slot) => slot === slots[0])) return;
  // One key per slot: the first few keys of a long list may all share a slot and show no conflict.
  const firstBySlot = new Map<number, string>();
  keys.forEach((k, i) => {
    if (!firstBySlot.has(slots[i])) firstBySlot.set(slots[i], k.name);
  });
  const listed = describeList(
    [...firstBySlot],
    ([slot, name]) => `${describeValue(name)} (slot ${slot})`,
  );
  throw new LockKeyError(
    `lock keys map to ${firstBySlot.size} different Redis Cluster slots: ${listed}; a multi-key ` +
      'lock needs one slot: give the keys a common hash tag, e.g. ' +
      "'{order:42}:stock' and '{order:42}:payment'",
    keys.map((k) => k.name),
  );
}
