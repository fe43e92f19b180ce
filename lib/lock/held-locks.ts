// This instance's bookkeeping of the locks it holds: by handle and by name (what key-based calls
// act on), swept of locks that ran out unreleased, released together on shutdown, and the recent
// hold time per lock (for `Retry-After` and the cohorts' estimates).
import { LockLostError } from '../errors/lock-lost.error';
import { Lock } from './lock';
import { checkLockNames } from './lock-keys';

/** How often locks that ran out unreleased are dropped from what this instance holds, in ms. */
const SWEEP_MS = 5_000;

/** Lock names whose recent hold time is remembered (for `Retry-After`); the oldest go first. */
const HOLD_TIMES_KEPT = 1_000;

/** The error of a lock whose TTL ran out before it was released. */
export function ttlRanOut(lock: Lock): LockLostError {
  return new LockLostError(
    lock.keys,
    `its TTL ran out at ${new Date(lock.expiresAt).toISOString()}`,
  );
}

/**
 * Every lock this instance holds (as far as it knows: released and lost ones are dropped), and
 * per lock name the lock it acquired last. Iterating gives the held locks.
 */
export class HeldLocks implements Iterable<Lock> {
  private readonly locks = new Set<Lock>();
  /**
   * Per lock (its value key in Redis: name and prefix), the lock this instance acquired last
   * there (what key-based calls act on).
   */
  private readonly byKey = new Map<string, Lock>();
  /** Locks `releaseAll` released: a `withLock` ending after it does not release them again. */
  private readonly releasedAll = new WeakSet<Lock>();
  private sweepTimer?: NodeJS.Timeout;
  /** Per lock value key, a moving average of how long this process held it (ms). */
  private readonly holdTimes = new Map<string, number>();

  [Symbol.iterator](): Iterator<Lock> {
    return this.locks.values();
  }

  /**
   * A Lock as given, or the lock this instance acquired last on a key, unless it ran out.
   * @param valueKey the Redis value key of a lock name (under the module's `keyPrefix`)
   */
  find(lockOrKey: Lock | string, valueKey: (name: string) => string): Lock | undefined {
    if (lockOrKey instanceof Lock) return lockOrKey;
    const lock = this.byKey.get(valueKey(checkLockNames(lockOrKey)[0]));
    if (!lock || !lock.isLost) return lock;
    this.drop(lock);
    return undefined;
  }

  add(lock: Lock): void {
    this.locks.add(lock);
    for (const k of lock.redisKeys) this.byKey.set(k.value, lock);
    if (!this.sweepTimer) {
      // Code that lets locks run out (a TTL used as a throttle) must not make `held` grow.
      this.sweepTimer = setInterval(() => {
        for (const l of this.locks) if (l.isLost) this.drop(l);
        if (this.locks.size === 0) {
          clearInterval(this.sweepTimer);
          this.sweepTimer = undefined;
        }
      }, SWEEP_MS);
      this.sweepTimer.unref();
    }
  }

  /** Whether `releaseAll` released `lock` (the module's shutdown, or the service's `releaseAll`). */
  released(lock: Lock): boolean {
    return this.releasedAll.has(lock);
  }

  forget(lock: Lock): void {
    this.locks.delete(lock);
    for (const k of lock.redisKeys)
      if (this.byKey.get(k.value) === lock) this.byKey.delete(k.value);
  }

  /** Releases every held lock with `release`; resolves how many were still held. */
  async releaseAll(release: (lock: Lock) => Promise<boolean>): Promise<number> {
    const locks = [...this.locks];
    for (const l of locks) this.releasedAll.add(l);
    const results = await Promise.allSettled(locks.map((l) => release(l)));
    return results.filter((r) => r.status === 'fulfilled' && r.value).length;
  }

  /** Keeps a moving average of hold times per lock (bounded: the oldest names are dropped). */
  recordHold(key: string, acquiredAt: number): void {
    const held = Date.now() - acquiredAt;
    const before = this.holdTimes.get(key);
    this.holdTimes.delete(key);
    this.holdTimes.set(key, before === undefined ? held : 0.8 * before + 0.2 * held);
    if (this.holdTimes.size > HOLD_TIMES_KEPT) {
      this.holdTimes.delete(this.holdTimes.keys().next().value as string);
    }
  }

  /** Recent hold time of the lock with value key `key` in this process (ms), if any was seen. */
  holdTime(key: string): number | undefined {
    return this.holdTimes.get(key);
  }

  /** Forgets a lock that ran out unreleased (its TTL is over by this process's clock). */
  private drop(lock: Lock): void {
    this.forget(lock);
    lock.end(ttlRanOut(lock));
    lock.cohort?.lost(lock);
  }
}
