/** How many replicas must acknowledge a lock before it counts as acquired (Redis `WAIT`). */
export interface WaitForReplicasOptions {
  /** Replicas that must acknowledge the lock's write (at least 1). */
  replicas: number;
  /** How long `WAIT` may block for them, in ms (at least 1; `WAIT 0` would block forever). */
  timeoutMs: number;
}

/** Options of one lock acquisition; unset fields fall back to the module's defaults. */
export interface LockOptions {
  /**
   * The `lock` attribute of this lock's OpenTelemetry metrics (docs/observability.md): name the
   * kind of lock, never the key itself, so that the number of series stays bounded. `@WithLock`
   * sets its key template; 1 to 200 characters.
   * @default '(unlabelled)'
   * @example
   * await locks.withLock(`order:${id}`, settle, { label: 'order:<id>' });
   */
  label?: string;
  /**
   * How long the lock lives unless extended or released, in ms: an integer from 1 to 86,400,000
   * (one day; a larger value is a `RedisLockOptionsError`). Also the default of `extend()`.
   * @default 30000
   * @example
   * await locks.acquire('report:daily', { ttlMs: 60_000 });
   */
  ttlMs?: number;
  /**
   * How long to wait for the lock, in ms: an integer from 0 to 86,400,000 (one day; a larger
   * value is a `RedisLockOptionsError`). `0` tries once. In quorum mode (`nodes`), when fewer
   * than a majority of nodes answer, the call rejects with `LockQuorumError` once the wait is
   * over (`tryAcquire` too: it resolves `null` only for contention). A caller that times out
   * has waited at least `waitMs` (`LockTimeoutError.waitedMs`).
   * @default 0
   * @example
   * await locks.acquire('stock:42', { waitMs: 2_000 });
   */
  waitMs?: number;
  /**
   * Poll interval of waiters outside any line, in ms (jittered between 50 % and 100 %): a
   * multi-key lock's and quorum mode's (each wakes on pub/sub too; the poll bounds what a lost
   * message costs). A single-key waiter never polls: it is woken by pub/sub, and its process
   * renews its place in line once a second.
   * @default 100
   */
  retryIntervalMs?: number;
  /**
   * First come, first served: waiters line up in a FIFO line kept in Redis, a release hands the
   * lock straight to the head of the line, and newcomers cannot barge ahead. `false` lets every
   * waiter race for the lock when it is released (cheaper, no ordering).
   * @default true
   */
  fair?: boolean;
  /**
   * Return a fencing token as `lock.fence` on every acquisition: strictly rising from grant to
   * grant of one lock. It comes from one counter per server (Cluster: per hash slot) shared by
   * every lock, so it costs one small Redis key in all, not one per lock name (docs/locks.md).
   * @default true
   */
  fencing?: boolean;
  /**
   * Prefix for the Redis keys of this lock (overrides the module's `keyPrefix`). At most 256
   * bytes; its first `{`, if any, opens a complete, non-empty hash tag (`'{app}:'`).
   */
  keyPrefix?: string;
  /**
   * Make the lock survive a failover to a replica: after it is acquired (and after every
   * extension), wait until `replicas` replicas acknowledged its write (Redis `WAIT`, sent right
   * behind it on the same connection), for at most `timeoutMs`. When fewer acknowledge in time an
   * acquisition releases the lock and throws `LockReplicationError`; an extension throws it and
   * leaves the lock held. Not available in quorum mode (`nodes`) nor with `mode: 'shared'`.
   *
   * Unset, on Sentinel (`redis: { sentinels, name }`): **`{ replicas: 1, timeoutMs: 500 }`
   * whenever the master has a replica** (counted when the client connects and every 5 s; a master
   * that had one keeps needing one), so that a master cut off from its replicas and sentinels (a
   * split brain) refuses locks with `LockReplicationError` instead of granting them a second time.
   * Unset elsewhere (one Redis, Cluster): no wait. `false`: never wait — with Sentinel, a lock
   * granted by a master that was just deposed, or that dies before replicating it, can then be
   * granted again by the promoted replica while its first holder still runs (docs/scaling.md).
   * @default undefined (Sentinel with replicas: `{ replicas: 1, timeoutMs: 500 }`; else no wait)
   * @example
   * await locks.acquire('payout:7', { waitForReplicas: { replicas: 1, timeoutMs: 100 } });
   * await locks.acquire('cache:warm', { waitForReplicas: false }); // opt out (see the risk above)
   */
  waitForReplicas?: WaitForReplicasOptions | false;
  /**
   * `'shared'` takes a read lock: any number of shared holders at once, or one exclusive holder.
   * Fair: a shared caller never passes a waiting exclusive one, so a writer gets in after the
   * readers holding now. Single key only; not in quorum mode. Taking the lock exclusively inside
   * a shared hold of it in the same call chain throws `LockUpgradeError` (see docs/locks.md).
   * @default 'exclusive'
   * @example
   * await locks.withLock('prices', () => readPrices(), { mode: 'shared', waitMs: 1000 });
   */
  mode?: 'shared' | 'exclusive';
  /** Aborting this signal stops waiting: the call rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** Options of `LockService.withLock`. */
export interface WithLockOptions extends LockOptions {
  /**
   * Extend the lock every `ttlMs / 3` while the callback runs. When an extension finds the lock
   * gone, `lock.signal` aborts with a `LockLostError`.
   * @default true
   */
  autoExtend?: boolean;
  /**
   * When the lock cannot be had within `waitMs`, don't run the callback: resolve `undefined`
   * instead of rejecting with `LockTimeoutError`, and log one line at debug level. Made for jobs
   * that any one instance may do (e.g. a scheduled cleanup): the others skip quietly. A method
   * declared to return an Observable completes without a value instead.
   * @default false
   * @example
   * await locks.withLock('report:daily', () => buildReport(), { skipIfLocked: true });
   */
  skipIfLocked?: boolean;
}

/**
 * Options of `LockService.withLockBatch`: those of `withLock` except `signal` and `skipIfLocked`
 * (a batch serves several callers), taken from the call that starts a batch.
 */
export interface BatchLockOptions extends Omit<WithLockOptions, 'signal' | 'skipIfLocked'> {
  /**
   * Most items one batch (one acquisition) takes; the others wait for the next batch.
   * @default 100
   */
  maxBatch?: number;
}
