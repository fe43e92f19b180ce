import type { WaitForReplicasOptions } from '../interfaces/lock-options.interface';
import type { ResolvedLockOptions } from '../options/resolve-options';
import type { LockRedisKeys } from './lock-keys';

/** Quorum mode: how far an operation fell short of a majority of answering nodes. */
export interface QuorumShortfall {
  /** Nodes the module uses. */
  nodes: number;
  /** Nodes that answered. */
  answered: number;
  /** Nodes that granted (acquire) or confirmed (release, extend, isHeld, isLocked). */
  granted: number;
  /** The quorum: `floor(nodes / 2) + 1`. */
  needed: number;
}

/**
 * What a caller that is not granted does: `'none'` gives up, `'line'` (single key, line stores
 * only) joins the lock's line or keeps its token's place there, `'mark'` waits outside any line
 * and marks the blocking lock so that its release announces itself.
 */
export type WaitMode = 'none' | 'line' | 'mark';

/** The `wait` flag of `acquire.lua` for each `WaitMode`. */
const WAIT_FLAG: Record<WaitMode, string> = { none: '0', line: '1', mark: 'm' };

/** The flags argument of `acquire.lua`: fencing, respectLine, wait, mode (see its header). */
export function acquireFlags(fencing: boolean, fair: boolean, wait: WaitMode): string {
  return `${fencing ? 1 : 0}${fair ? 1 : 0}${WAIT_FLAG[wait]}${fair ? 'h' : 'w'}`;
}

/** The outcome of one acquisition attempt (or of leaving the line). */
export interface LockAttempt {
  granted: boolean;
  /** Per key, when granted: the fence (`0` when fencing is off or not available). */
  fences: number[];
  /** When granted: epoch ms until which the lock is surely held. */
  expiresAt: number;
  /** Redis clock (ms) when the script ran (single node: dates a handoff message). */
  redisNow: number;
  /** Local clock (ms) when the request was sent. */
  sentAt: number;
  /** Holder's PTTL; -1 holder without TTL; -2 free but others first in line. */
  wait: number;
  /** When granted (single key): other waiters stand in the lock's line. */
  others?: boolean;
  /** When not granted: entries in the blocking lock's line. */
  lineLength?: number;
  /** Quorum mode: set when fewer nodes than a quorum answered (not contention: an outage). */
  shortOf?: QuorumShortfall;
}

/** The outcome of a local handoff (`handoff.lua`). */
export interface LockHandoff {
  /** The old token still held the lock, and the new one holds it now. */
  handed: boolean;
  /** Another process waits in the lock's line. */
  others: boolean;
  fence: number;
  /** Local clock (ms) when the request was sent. */
  sentAt: number;
}

/** A place in a lock's line that its process renews (`renew.lua`). */
export interface LineEntry {
  key: LockRedisKeys;
  token: string;
  /** `ttlMs:fencing:mode` of the entry (see acquire.lua). */
  spec: string;
}

/** What a renewal found for one entry. */
export type LineStatus =
  | { state: 'waiting' }
  /** Still in line, and the lock is free: its holder let it lapse (crashed, frozen). */
  | { state: 'free' }
  /** The entry is gone (its deadline passed while this process was frozen or cut off). */
  | { state: 'gone' }
  /** The lock was handed to the entry's token (its message was lost). */
  | { state: 'handed'; fence: number; expiresAt: number };

/** The outcome of a release that asked for a place at the end of the line (`rejoin`). */
export interface LockRejoin {
  released: boolean;
  /** `'line'`: the token waits in line; `'granted'`: nobody else waited, the token holds it. */
  outcome: 'line' | 'granted' | 'none';
  fence: number;
  sentAt: number;
  /** Redis clock (ms) when the script ran (dates a later handoff message). */
  redisNow: number;
}

/** The outcome of an extension. */
export interface LockExtension {
  /** The token still held the lock (on a quorum of nodes in quorum mode) and it was extended. */
  held: boolean;
  /** When held: epoch ms until which the lock is surely held now. */
  expiresAt: number;
  /** With `waitForReplicas`: how many replicas acknowledged the extension. */
  acknowledged?: number;
}

/**
 * Where locks live: the Redis calls behind `LockService`, one implementation per topology, so the
 * service keeps one place for lock semantics (waiting, handoff, auto-extension, reentrancy).
 * - `SingleNodeLockStore`: one Redis, Sentinel master or Cluster (fair lines, handoff, fences).
 * - `QuorumLockStore`: Redlock over independent masters (no lines; each fence is written back
 *   to a majority before the grant).
 */
export interface LockStore {
  /**
   * Whether single-key waiters can stand in a FIFO line, be handed the lock on release, and be
   * renewed in batches; only then does `LockService` use cohorts, `handoff`, `renew` and `rejoin`.
   */
  readonly lines: boolean;
  /** Throws `LockKeyError` / `RedisLockOptionsError` when `keys` or `o` cannot be served here. */
  check(keys: readonly LockRedisKeys[], o: ResolvedLockOptions): void;
  /**
   * One attempt to take every key for `token`; `wait` says what a caller that is not granted does
   * (see `WaitMode`). An attempt that fails or is answered late is undone by a release of `token`,
   * except with `wait: 'line'`: the line token outlives the call and may be handed the lock by a
   * message meanwhile, so its owner undoes it (`onLate`: the reply came after the bound).
   */
  attempt(
    keys: readonly LockRedisKeys[],
    token: string,
    o: ResolvedLockOptions,
    wait: WaitMode,
    onLate?: () => void,
  ): Promise<LockAttempt>;
  /**
   * Passes a held single-key lock from `oldToken` to `newToken` (same process, `handoff.lua`).
   * When it fails, the caller gives both tokens back: either may hold the lock.
   */
  handoff(
    key: LockRedisKeys,
    oldToken: string,
    newToken: string,
    o: ResolvedLockOptions,
  ): Promise<LockHandoff>;
  /**
   * Releases a single-key lock held by `token` and puts `entry.token` at the end of its line (or
   * grants it the lock when nobody else waits). `onLate`: the reply came after the bound.
   */
  rejoin(
    key: LockRedisKeys,
    token: string,
    entry: LineEntry,
    onLate?: () => void,
  ): Promise<LockRejoin>;
  /** Renews line entries of this process, one call per Cluster slot; statuses in input order. */
  renew(entries: readonly LineEntry[]): Promise<LineStatus[]>;
  /**
   * Leaves the line, and releases a lock handed to `token` in the meantime (handing it on) in the
   * same call; granted when there was one.
   */
  leaveLine(key: LockRedisKeys, token: string): Promise<LockAttempt>;
  /** Releases the lock if `token` holds it; `true` when it did (on every key). */
  release(keys: readonly LockRedisKeys[], token: string): Promise<boolean>;
  /** Sets the lock's TTL if `token` holds it; then `WAIT`s for replicas when asked to. */
  extend(
    keys: readonly LockRedisKeys[],
    token: string,
    ttlMs: number,
    waitForReplicas?: WaitForReplicasOptions,
  ): Promise<LockExtension>;
  /** Whether `token` holds every key. */
  isHeld(keys: readonly LockRedisKeys[], token: string): Promise<boolean>;
  /** Whether anyone holds `key`. */
  isLocked(key: LockRedisKeys): Promise<boolean>;
  /** Calls `onMessage` for release announcements of a lock until the returned function is called. */
  listen(channel: string, onMessage: (message: string) => void): Promise<() => void>;
  /** Whether `channel` is subscribed already (a `listen` on it costs no round trip). */
  isSubscribed(channel: string): boolean;
}

/**
 * The release message meaning "free, check again" ('f', release.lua), also given to a lock's
 * listeners when its channel was subscribed again (a reconnect, a Cluster failover), since
 * messages published meanwhile were lost.
 */
export const RECHECK_MESSAGE = 'f';

/**
 * The value and fence key of every lock: the KEYS of the acquire and release scripts. They name
 * each lock's line, entries and channel after its value key themselves (`scripts/lock-keys.lua`:
 * same hash tag, so same Cluster slot), since each key passed costs the server on the hot path.
 */
export function lockScriptKeys(keys: readonly LockRedisKeys[]): string[] {
  const out: string[] = [];
  for (const k of keys) out.push(k.value, k.fence);
  return out;
}

/**
 * Every key of one lock: the KEYS of the scripts that may serve its shared waiters
 * (`scripts/shared-common.lua`: acquire-shared, release-shared and leave-line).
 */
export function sharedScriptKeys(k: LockRedisKeys): string[] {
  return [k.value, k.fence, k.line, k.entries, k.shared, k.channel];
}

/** How often a process renews its line entries (one call for all of them), in ms. */
export const LINE_RENEW_MS = 1_000;

/**
 * How long a line entry stays live without renewal, in ms: three renewal periods. A process that
 * is frozen (or cut off from Redis) longer than this loses its places in line.
 */
export const LINE_ENTRY_TTL_MS = 3 * LINE_RENEW_MS;

/** The `ttlMs:fencing:mode` part of a line entry for callers with options `o`. */
export function entrySpec(o: ResolvedLockOptions): string {
  return `${o.ttlMs}:${o.fencing ? 1 : 0}:${o.fair ? 'h' : 'w'}`;
}
