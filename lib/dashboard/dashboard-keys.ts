import { decodeKeyName, taggedKey } from '../redis/tagged-key';

/** LIST of the recent lock timeouts and lost locks, shared by every instance of the app. */
export function recentEventsKey(prefix: string): string {
  return taggedKey(prefix, 'dashboard', 'recent');
}

/**
 * ZSET lock name -> when a dashboard last showed it held (Redis-clock ms): the locks whose local
 * waiters every instance reports. Shares its slot with `localWaitersKey` (one script reads both).
 */
export function shownLocksKey(prefix: string): string {
  return `${taggedKey(prefix, 'dashboard', 'local')}:shown`;
}

/**
 * HASH instanceId -> `<Redis-clock ms>|<JSON { lock name: callers }>`: the callers waiting in each
 * instance's local cohorts for the shown locks, as its last report said.
 */
export function localWaitersKey(prefix: string): string {
  return `${taggedKey(prefix, 'dashboard', 'local')}:waiters`;
}

/** HASH second -> tasks completed, under the queue's hash tag (so in the queue's Cluster slot). */
export function throughputKey(prefix: string, queue: string): string {
  return `${taggedKey(prefix, 'queue', queue)}:throughput`;
}

/**
 * The lock name whose value key is `key` (`<prefix>lock:<encodeKeyName(name)>`); `undefined` for
 * keys no lock name has.
 */
export function lockNameOf(prefix: string, key: string): string | undefined {
  return decodeKeyName(key.slice(prefix.length + 'lock:'.length));
}

/**
 * The queue name of a queue key (`<prefix>queue:<encodeKeyName(name)>:<part>`), for the parts
 * listed.
 */
export function queueNameOf(
  prefix: string,
  key: string,
  parts: readonly string[],
): string | undefined {
  const rest = key.slice(prefix.length + 'queue:'.length);
  const colon = rest.lastIndexOf(':');
  if (colon < 0 || !parts.includes(rest.slice(colon + 1))) return undefined;
  return decodeKeyName(rest.slice(0, colon));
}
