// How one acquisition runs, from a checked call to a Lock or a timeout: refused once the module
// closes, waited for the way the lock waits (shared, local cohort, or polled), granted (the Lock
// handle, registered as held), confirmed on the replicas with `waitForReplicas`, and reported
// (metrics, trace span, `lock.timeout`).
import { setMaxListeners } from 'node:events';
import { LockLostError } from '../errors/lock-lost.error';
import { LockReplicationError } from '../errors/lock-replication.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import type { RedisLockEvents } from '../events/redis-lock-events';
import type { WaitForReplicasOptions } from '../interfaces/lock-options.interface';
import { UNLABELLED, type LockMetrics } from '../observability/metrics';
import { LockTracing } from '../observability/tracing';
import type { ResolvedLockOptions } from '../options/resolve-options';
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
  /** Aborted at shutdown: ends the waits outside a line (multi-key, shared, quorum). */
  private readonly stopping = new AbortController();
  /** Acquisitions under way, and what to call once the last one ends (shutdown waits for it). */
  private running = 0;
  private idle?: () => void;
  private readonly tracing = new LockTracing();

  constructor(private readonly parts: AcquirerParts) {
    // One listener per waiting acquisition: thousands may wait, and none of them is a leak.
    setMaxListeners(0, this.stopping.signal);
  }

  /**
   * Module shutdown: refuses every acquisition from now on, and fails the waits outside a line
   * with `reason` (the cohorts tell their own waiters).
   */
  refuseNew(reason: unknown): void {
    this.closing = true;
    this.stopping.abort(reason);
  }

  /**
   * Resolves once no acquisition is under way (each is bounded: its waits end at shutdown, its
   * Redis calls by `commandTimeoutMs`); one granted after `refuseNew` was released already.
   */
  settled(): Promise<void> {
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => (this.idle = resolve));
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
    this.running++;
    try {
      result = await this.obtainFrom(keys, o, started);
      if (this.closing && result instanceof Lock) {
        // Granted while the module shut down: nobody is to hold it after the shutdown.
        await this.parts.handles.releaseLock(result).catch(() => undefined);
        throw this.stopping.signal.reason;
      }
      if (o.signal?.aborted && result instanceof Lock) {
        // The caller gave up while the grant's reply was on its way (a wait only ends by its
        // signal while it waits): it is not to hold it, nor to run a withLock callback under it.
        await this.parts.handles.releaseLock(result).catch(() => undefined);
        throw o.signal.reason;
      }
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
    } finally {
      if (--this.running === 0) this.idle?.();
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
    if (keys.length === 1 && store.lines && o.mode !== 'shared') {
      result = await cohorts.of(keys[0]).acquire(o, started);
    } else {
      // Outside a line: the wait also ends when the module shuts down.
      const link = o.waitMs > 0 ? linkSignals(o.signal, this.stopping.signal) : undefined;
      const w = link ? { ...o, signal: link.signal } : o;
      try {
        result =
          o.mode === 'shared'
            ? await shared.obtain(keys[0], w, started, (token, fence, expiresAt) =>
                this.grant(keys, token, o, [fence], expiresAt),
              )
            : await acquirePolled(store, keys, w, started, newToken, (token, fences, at) =>
                this.grant(keys, token, o, fences, at),
              );
      } finally {
        link?.dispose();
      }
    }
    if (result instanceof Lock && o.waitForReplicas !== false) {
      const w = o.waitForReplicas ?? (await this.defaultReplicaWait(result));
      if (w) await this.confirmReplicated(result, w);
    }
    return result;
  }

  /**
   * Sentinel, `waitForReplicas` unset: `DEFAULT_REPLICA_WAIT` when the master has (or had) a
   * replica, nothing elsewhere. The lock is marked as using the default, so that each extension
   * asks the count again (lock-handles.ts). A failure to tell releases the lock and fails the
   * acquisition.
   */
  private async defaultReplicaWait(lock: Lock): Promise<WaitForReplicasOptions | undefined> {
    if (!this.parts.connection.replicaWatch || this.parts.shared.owns(lock)) return undefined;
    lock.waitsByDefault = true;
    try {
      return await this.parts.handles.defaultReplicaWait();
    } catch (err) {
      await this.parts.handles.releaseLock(lock).catch(() => undefined);
      throw err;
    }
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

/**
 * A signal aborted when `signal` (the caller's, if any) or `stopping` aborts, with its reason;
 * `dispose` removes the listeners it added (a caller's signal may outlive many acquisitions).
 */
function linkSignals(
  signal: AbortSignal | undefined,
  stopping: AbortSignal,
): { signal: AbortSignal; dispose: () => void } {
  if (!signal) return { signal: stopping, dispose: () => undefined };
  const linked = new AbortController();
  const fromCaller = () => linked.abort(signal.reason);
  const fromStop = () => linked.abort(stopping.reason);
  if (signal.aborted) fromCaller();
  else if (stopping.aborted) fromStop();
  signal.addEventListener('abort', fromCaller, { once: true });
  stopping.addEventListener('abort', fromStop, { once: true });
  return {
    signal: linked.signal,
    dispose: () => {
      signal.removeEventListener('abort', fromCaller);
      stopping.removeEventListener('abort', fromStop);
    },
  };
}
