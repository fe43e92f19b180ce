// What the methods of a `Lock` handle do (its `LockOwner`, lock.ts): release, extend and check
// it the way it was granted (shared, through a local cohort, or by the store), keep it extended
// while a callback runs, and report it lost.
import { LockLostError } from '../errors/lock-lost.error';
import { LockReplicationError } from '../errors/lock-replication.error';
import type { LockLostEvent } from '../events/redis-lock-event-map';
import type { RedisLockEvents } from '../events/redis-lock-events';
import type { WaitForReplicasOptions } from '../interfaces/lock-options.interface';
import type { LockMetrics } from '../observability/metrics';
import { DEFAULT_REPLICA_WAIT, resolveLockOptions } from '../options/resolve-options';
import type { RedisLockConnection } from '../redis/redis-connection';
import { holderDeadline } from '../waiting/grant-deadline';
import { keepExtended } from '../waiting/keep-extended';
import { ttlRanOut, type HeldLocks } from './held-locks';
import type { Lock, LockOwner } from './lock';
import type { LockStore } from './lock-store';
import type { SharedLocks } from './shared-locks';

/** The owner of every Lock one `LockService` grants. */
export class LockHandles implements LockOwner {
  constructor(
    private readonly connection: RedisLockConnection,
    private readonly store: LockStore,
    private readonly shared: SharedLocks,
    private readonly held: HeldLocks,
    private readonly metrics: LockMetrics,
    /** The module's events: `lock.lost` is emitted on it. */
    private readonly events: RedisLockEvents,
  ) {}

  releaseLock(lock: Lock): Promise<boolean> {
    // The release is sent first: a waiter parked in another process is woken by it, and the
    // bookkeeping below (same tick, so no caller can tell the order) would only delay it.
    const shared = this.shared.owns(lock);
    const released = shared
      ? this.shared.release(lock.redisKeys[0], lock.token)
      : lock.cohort
        ? lock.cohort.release(lock)
        : this.store.release(lock.redisKeys, lock.token);
    this.held.forget(lock);
    if (!lock.isEnded) this.metrics.released(lock.label, Date.now() - lock.acquiredAt);
    // Released after its TTL ran out (a callback that outlived it): it was lost before.
    lock.end(lock.isLost ? ttlRanOut(lock) : undefined);
    if (!shared && lock.redisKeys.length === 1) {
      this.held.recordHold(lock.redisKeys[0].value, lock.acquiredAt);
    }
    return released;
  }

  /**
   * @throws LockReplicationError when the lock's `waitForReplicas` was not satisfied (the lock
   *   stays held and extended on the master)
   */
  async extendLock(lock: Lock, ttlMs: number): Promise<boolean> {
    const ttl = resolveLockOptions(this.connection.options.lock, { ttlMs }).ttlMs;
    const w = lock.waitsByDefault ? await this.defaultReplicaWait() : lock.waitForReplicas;
    const sentAt = Date.now();
    const extension = this.shared.owns(lock)
      ? {
          held: await this.shared.extend(lock.redisKeys[0], lock.token, ttl),
          expiresAt: holderDeadline(sentAt, ttl, this.connection.options.clockDriftFactor),
        }
      : await this.store.extend(lock.redisKeys, lock.token, ttl, w);
    if (extension.held) {
      if (w && extension.acknowledged! < w.replicas) {
        // Held on the master, but not durably: `expiresAt` stays at the last acknowledged
        // extension, so auto-extension aborts the signal if none is acknowledged before it.
        throw new LockReplicationError(
          lock.keys,
          'extend',
          extension.acknowledged!,
          w.replicas,
          w.timeoutMs,
        );
      }
      lock.setExpiresAt(extension.expiresAt);
      return true;
    }
    this.held.forget(lock);
    lock.end(
      new LockLostError(lock.keys, 'it expired or another owner holds it now'),
      lock.expiresAt <= Date.now() ? 'expired' : 'taken',
    );
    lock.cohort?.lost(lock);
    return false;
  }

  /**
   * Sentinel's default wait: `DEFAULT_REPLICA_WAIT` while the current master has (or had, this
   * term) a replica, else none. Asked for every write of a lock, not once at its grant: a lock
   * held across a promotion is extended on a master with no replica yet (waiting for one would
   * fail every extension until its TTL ran out), and a lock granted then waits once a replica
   * joins. The count is ReplicaWatch's, kept in memory: no Redis command of its own.
   */
  async defaultReplicaWait(): Promise<WaitForReplicasOptions | undefined> {
    const replicas = await this.connection.replicaWatch!.replicas();
    return replicas > 0 ? DEFAULT_REPLICA_WAIT : undefined;
  }

  async isHeldLock(lock: Lock): Promise<boolean> {
    if (this.shared.owns(lock)) return this.shared.extend(lock.redisKeys[0], lock.token, 0);
    return this.store.isHeld(lock.redisKeys, lock.token);
  }

  lockLost(lock: Lock, why: LockLostEvent['reason']): void {
    this.metrics.lost(lock.label, why);
    if (this.events.hasListeners('lock.lost')) {
      this.events.emit('lock.lost', { keys: lock.keys, reason: why });
    }
  }

  /**
   * Extends the lock whenever a third of its TTL has passed, until the returned function is
   * called. Never throws: a lost lock aborts `lock.signal`; a failed extension is retried until
   * the lock would have expired, and then aborts it too.
   */
  keepExtended(lock: Lock): () => void {
    return keepExtended(
      lock,
      (ms) => this.extendLock(lock, ms),
      (detail) => lock.end(new LockLostError(lock.keys, `it ${detail}`), 'unreachable'),
    );
  }
}
