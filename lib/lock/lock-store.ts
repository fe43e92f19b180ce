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
  /** Quorum mode: set when fewer nodes than a quorum answered (not contention: an outage). */
  shortOf?: QuorumShortfall;
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
 * - `QuorumLockStore`: Redlock over independent masters (no lines, no fences).
 */
export interface LockStore {
  /** Whether fair waiters can stand in a FIFO line and be handed the lock on release. */
  readonly lines: boolean;
  /** Throws `LockKeyError` / `RedisLockOptionsError` when `keys` or `o` cannot be served here. */
  check(keys: readonly LockRedisKeys[], o: ResolvedLockOptions): void;
  /**
   * One attempt to take every key for `token`; `join` (single key, fair) joins or renews the
   * token's place in the line when the lock is not granted.
   */
  attempt(
    keys: readonly LockRedisKeys[],
    token: string,
    o: ResolvedLockOptions,
    join: boolean,
  ): Promise<LockAttempt>;
  /** Leaves the line; granted when the lock was handed to `token` in the meantime. */
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
}

/** The value, fence, line, entries and channel key of every lock (the release script's KEYS). */
export function releaseKeys(keys: readonly LockRedisKeys[]): string[] {
  const out: string[] = [];
  for (const k of keys) out.push(k.value, k.fence, k.line, k.entries, k.channel);
  return out;
}

/** The value, fence, line and entries key of every lock (the acquire script's KEYS). */
export function acquireKeys(keys: readonly LockRedisKeys[]): string[] {
  const out: string[] = [];
  for (const k of keys) out.push(k.value, k.fence, k.line, k.entries);
  return out;
}

/** How long a line entry stays live without renewal: three poll intervals, at least 1 s. */
export function lineEntryTtl(o: ResolvedLockOptions): number {
  return Math.max(1_000, 3 * o.retryIntervalMs);
}
