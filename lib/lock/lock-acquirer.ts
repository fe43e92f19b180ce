// How one acquisition runs, from a checked call to a Lock or a timeout: refused once the module
// closes, waited for the way the lock waits (shared, local cohort, or polled), granted (the Lock
// handle, registered as held), confirmed on the replicas with `waitForReplicas`, and reported
// (metrics, trace span, `lock.timeout`).
import { LockLostError } from '../errors/lock-lost.error';
import { LockReplicationError } from '../errors/lock-replication.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import type { RedisLockEvents } from '../events/redis-lock-events';
import type { WaitForReplicasOptions } from '../interfaces/lock-options.interface';
import { UNLABELLED, type LockMetrics } from '../observability/metrics';
import { LockTracing } from '../observability/tracing';
import { DEFAULT_REPLICA_WAIT, type ResolvedLockOptions } from '../options/resolve-options';
import type { RedisLockConnection } from '../redis/redis-connection';
import type { HeldLocks } from './held-locks';
import { Lock, type LockCohortRef } from './lock';
import type { LockCohorts } from './lock-cohorts';
import type { LockHandles } from './lock-handles';
import type { LockRedisKeys } from './lock-keys';
import type { LockStore } from './lock-store';
import { acquirePolled } from './polled-wait';
import type { SharedLocks } from './shared-locks';

/** What acquisitions need from the `LockService` that runs them. */
export interface AcquirerParts {
  readonly connection: RedisLockConnection;
  readonly store: LockStore;
  readonly shared: SharedLocks;
  readonly cohorts: LockCohorts;
  readonly held: HeldLocks;
  /** The owner of the locks granted: releases and extends them. */
  readonly handles: LockHandles;
  readonly metrics: LockMetrics;
  /** The module's events: `lock.timeout` is emitted on it. */
  readonly events: RedisLockEvents;
  newToken(): string;
}

/** Runs the acquisitions of one `LockService`. */
export class LockAcquirer {
  /** Set when the application shuts down: acquisitions are refused from then on. */
  private closing = false;
  private readonly tracing = new LockTracing();

  constructor(private readonly parts: AcquirerParts) {}

  /** Refuses every acquisition from now on (module shutdown). */
  refuseNew(): void {
    this.closing = true;
  }

  /** Acquires, or returns the timeout error (not thrown, so tryAcquire needs no try/catch). */
  async obtain(keys: LockRedisKeys[], o: ResolvedLockOptions): Promise<Lock | LockTimeoutError> {
    o.signal?.throwIfAborted();
    if (this.closing) {
      throw new RedisUnavailableError('lock acquire', 'the module is shutting down');
    }
    const { metrics, events } = this.parts;
    const started = Date.now();
    const label = o.label ?? UNLABELLED;
    const span = this.tracing.start(label);
    const counted = metrics.waitStarted(label);
    let result: Lock | LockTimeoutError;
    try {
      result = await this.obtainFrom(keys, o, started);
    } catch (err) {
      const aborted = o.signal?.aborted === true;
      const outcome = aborted ? 'timeout' : 'error';
      metrics.acquired(label, outcome, Date.now() - started);
      if (counted) metrics.waitEnded(label);
      if (span) this.tracing.end(span, outcome, Date.now() - started, undefined, err);
      if (aborted && events.hasListeners('lock.timeout')) {
        const waitedMs = Date.now() - started;
        const names = keys.map((k) => k.name);
        events.emit('lock.timeout', { keys: names, waitedMs, reason: 'aborted' });
      }
      throw err;
    }
    const timedOut = result instanceof LockTimeoutError;
    const outcome = timedOut ? 'timeout' : 'acquired';
    metrics.acquired(label, outcome, Date.now() - started);
    if (counted) metrics.waitEnded(label);
    if (span)
      this.tracing.end(
        span,
        outcome,
        Date.now() - started,
        timedOut ? undefined : (result as Lock).fences[0],
      );
    if (timedOut && events.hasListeners('lock.timeout')) {
      const { keys: names, waitedMs } = result as LockTimeoutError;
      events.emit('lock.timeout', { keys: names, waitedMs, reason: 'timeout' });
    }
    return result;
  }

  /** Creates the Lock handle of a grant and registers it as held. */
  grant(
    keys: LockRedisKeys[],
    token: string,
    o: ResolvedLockOptions,
    fences: number[],
    expiresAt: number,
    cohort?: LockCohortRef,
  ): Lock {
    const lock = Lock.create(
      this.parts.handles,
      keys,
      token,
      o.fencing ? fences : fences.map(() => 0),
      expiresAt,
      o.ttlMs,
      o.waitForReplicas || undefined,
      cohort,
    );
    if (o.label !== undefined) lock.label = o.label;
    this.parts.held.add(lock);
    return lock;
  }

  private async obtainFrom(
    keys: LockRedisKeys[],
    o: ResolvedLockOptions,
    started: number,
  ): Promise<Lock | LockTimeoutError> {
    const { store, shared, cohorts, newToken } = this.parts;
    let result: Lock | LockTimeoutError;
    if (o.mode === 'shared') {
      result = await shared.obtain(keys[0], o, started, (token, fence, expiresAt) =>
        this.grant(keys, token, o, [fence], expiresAt),
      );
    } else if (keys.length === 1 && store.lines) {
      result = await cohorts.of(keys[0]).acquire(o, started);
    } else {
      result = await acquirePolled(store, keys, o, started, newToken, (token, fences, at) =>
        this.grant(keys, token, o, fences, at),
      );
    }
    if (result instanceof Lock && o.waitForReplicas !== false) {
      const w = o.waitForReplicas ?? (await this.defaultReplicaWait(result));
      if (w) await this.confirmReplicated(result, w);
    }
    return result;
  }

  /**
   * Sentinel, `waitForReplicas` unset: `DEFAULT_REPLICA_WAIT` when the master has (or had) a
   * replica, also for the lock's extensions; nothing elsewhere. A failure to tell releases the
   * lock and fails the acquisition.
   */
  private async defaultReplicaWait(lock: Lock): Promise<WaitForReplicasOptions | undefined> {
    const watch = this.parts.connection.replicaWatch;
    if (!watch || this.parts.shared.owns(lock)) return undefined;
    let replicas: number;
    try {
      replicas = await watch.replicas();
    } catch (err) {
      await this.parts.handles.releaseLock(lock).catch(() => undefined);
      throw err;
    }
    if (replicas === 0) return undefined;
    lock.waitForReplicas = DEFAULT_REPLICA_WAIT;
    return DEFAULT_REPLICA_WAIT;
  }

  /**
   * `waitForReplicas`: extends the new lock to its full TTL with `WAIT` right behind it (the
   * extension is a write of this connection, whichever way the lock was granted). When too few
   * replicas acknowledge, the lock is released and the acquisition fails.
   */
  private async confirmReplicated(lock: Lock, w: WaitForReplicasOptions): Promise<void> {
    let failure: unknown;
    try {
      if (await this.parts.handles.extendLock(lock, lock.ttlMs)) return;
      failure = new LockLostError(lock.keys, 'it expired before its replication was confirmed');
    } catch (err) {
      failure =
        err instanceof LockReplicationError
          ? new LockReplicationError(
              lock.keys,
              'acquire',
              err.acknowledged,
              w.replicas,
              w.timeoutMs,
            )
          : err;
    }
    await this.parts.handles.releaseLock(lock).catch(() => undefined);
    throw failure;
  }
}
