import type { Cluster, ClusterNode, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import type { WaitForReplicasOptions } from './lock-options.interface';
import type { QueueDefaults } from './queue-options.interface';

export type {
  NamedHandlerConfig,
  QueueDefaults,
  QueueOwnOptions,
  QueueWorkersConfig,
  RetryLogLevel,
} from './queue-options.interface';

/** Creates an ioredis `Cluster` client for the module (closed by the module on shutdown). */
export interface RedisClusterConnectionOptions {
  cluster: ClusterNode[];
  options?: ClusterOptions;
}

/**
 * What the boot check does about a master whose `maxmemory-policy` is not `noeviction`: log one
 * warning per master, fail the start, or skip the check (see `RedisLockModuleOptions.evictionPolicy`).
 */
export type EvictionPolicyMode = 'warn' | 'fail' | 'ignore';

/** Where the module's Redis is. */
export type RedisConnectionOption =
  string | RedisOptions | Redis | Cluster | RedisClusterConnectionOptions;

/** Options of `RedisLockModule.forRoot` / `forRootAsync`. */
export interface RedisLockModuleOptions {
  /**
   * The Redis to use: a URL (`redis://host:6379/0`), ioredis options (including Sentinel:
   * `{ sentinels: [{ host, port }], name: 'mymaster' }`), an ioredis `Redis` or `Cluster`
   * instance, or `{ cluster: nodes, options }`. An instance you pass in is never closed by the
   * module; a client the module creates is closed on application shutdown.
   * With `nodes` set, locks use `nodes` and only the queue uses `redis`. A Sentinel client the
   * module creates gets ioredis' `failoverDetector: true` unless you set it (it reconnects on a
   * sentinel's `+switch-master`), and on Sentinel locks wait for a replica by default (see
   * `waitForReplicas`). Its passwords (URL, `password`, `sentinelPassword`, a Cluster's
   * `redisOptions.password`) never appear in the module's errors, events or logs: they show as
   * `***` (README, "Errors"). ioredis's own `keyPrefix` (a URL's `?keyPrefix=`, the options', a
   * client's) is refused with `RedisLockOptionsError`: it would prefix keys but not the pub/sub
   * channels; use the module's `keyPrefix`.
   * @default 'redis://127.0.0.1:6379'
   * @example
   * redis: { cluster: [{ host: '10.0.0.1', port: 7000 }], options: { redisOptions: { password } } }
   * redis: { sentinels: [{ host: '10.0.0.5', port: 26379 }], name: 'mymaster' }
   */
  redis?: RedisConnectionOption;
  /**
   * Redlock (quorum mode): three or more independent Redis masters (each given like `redis`).
   * Every lock is taken on all of them in parallel and granted when a majority
   * (`floor(n / 2) + 1`) granted it within its validity time. Not fair (`fair` does not apply);
   * fenced when `fencing` is on: a grant's fence is one above the highest of the next fences the
   * granting nodes handed out, written back to a majority before the grant is reported, so it
   * rises strictly per lock (docs/scaling.md: under quorum mode's clock assumptions). The queue keeps
   * using `redis`; semaphores are not available. Nodes that are one server (one address, or one
   * `run_id` at boot) are refused.
   * @default undefined (locks use `redis`)
   * @example
   * nodes: ['redis://10.0.0.1:6379', 'redis://10.0.0.2:6379', 'redis://10.0.0.3:6379']
   */
  nodes?: RedisConnectionOption[];
  /**
   * The clock drift allowed between this process and Redis, as a fraction of the TTL: a holder's
   * deadline is `lock.expiresAt = sentAt + ttl - (clockDriftFactor * ttl + 2 ms)`, and its
   * `signal` aborts `min(20 ms, ttl / 4)` before that (docs/locks.md, "The holder's deadline"),
   * so that it learns of a lost lock before Redis can grant it to anyone else. In quorum mode the
   * same allowance gives a lock's validity: `ttl - elapsed - (clockDriftFactor * ttl + 2 ms)`.
   * Applies to semaphore permits too.
   * @default 0.01
   */
  clockDriftFactor?: number;
  /**
   * Prefix of every Redis key and channel the module uses. At most 256 bytes; its first `{`, if any,
   * opens a complete, non-empty hash tag (`'{app}:'`, which puts every key into one Cluster slot).
   * @default ''
   */
  keyPrefix?: string;
  /**
   * Bound of every Redis command the module awaits, in ms. A command that has not answered by
   * then rejects with `RedisUnavailableError`.
   * @default 5000
   */
  commandTimeoutMs?: number;
  /** Default lock TTL in ms, at most one day (86,400,000). @default 30000 */
  ttlMs?: number;
  /** Default wait for a lock in ms (`0`: try once), at most one day (86,400,000). @default 0 */
  waitMs?: number;
  /**
   * Default poll interval, in ms, of lock waiters outside any line (multi-key locks, quorum
   * mode); single-key waiters are woken by pub/sub and never poll (`LockOptions.retryIntervalMs`).
   * @default 100
   */
  retryIntervalMs?: number;
  /** Default fairness (FIFO line with direct handoff). @default true */
  fair?: boolean;
  /** Default fencing (`lock.fence`, from the server's fence counter). @default true */
  fencing?: boolean;
  /**
   * Default `waitForReplicas` of locks (Redis `WAIT` after acquire and extend); see `LockOptions`.
   * Unset on Sentinel: wait for 1 replica (500 ms at most) whenever the master has one, so that a
   * deposed master cannot grant a lock twice; `false` opts out (and takes that risk).
   * @default undefined (Sentinel with replicas: `{ replicas: 1, timeoutMs: 500 }`; else no wait)
   * @example waitForReplicas: false
   */
  waitForReplicas?: WaitForReplicasOptions | false;
  /**
   * Local cohorts: callers of this process that wait for the same lock wait in an in-process FIFO
   * behind one place in the Redis line, and a release passes the lock to the next local caller in
   * one round trip (its own token, full TTL and a new, larger fence) without waking any other
   * process. While other processes wait, at most this many local handoffs happen in a row; then
   * the lock goes to the Redis line and this process queues again at its end, so no process
   * starves. `0` turns cohorts off: every caller stands in the Redis line itself. Applies to
   * single-key locks on one Redis, Sentinel or Cluster (not to multi-key locks or quorum mode);
   * see docs/locks.md.
   * @default 16
   */
  maxLocalHandoffs?: number;
  /**
   * How long a fence counter of the locks lives after it was created, in ms (at least 1000). A
   * counter that is gone is created again starting at Redis `TIME` in microseconds, which is above
   * every fence the old one handed out, so fences stay strictly increasing (one counter per server,
   * on Cluster per hash slot, in quorum mode per lock). This rests on Redis's clock (the master's, also after a failover) never going
   * back by more than `fenceTtlMs`; see docs/locks.md.
   * @default 3600000 (one hour)
   */
  fenceTtlMs?: number;
  /**
   * Names this instance as a lock holder or waiter in `LockService.inspect`: every lock token
   * carries a short random tag of the instance, and the tag's owner record (a Redis key with a
   * TTL, refreshed while the module runs) maps it to this id. 1 to 200 printable ASCII characters.
   * @default `${os.hostname()}:${process.pid}`
   * @example instanceId: `${process.env.POD_NAME}:${process.pid}`
   */
  instanceId?: string;
  /**
   * Fail fast: when set, the module PINGs Redis while the application starts and, without an
   * answer within this many ms, closes its connections and makes the start fail with
   * `RedisUnavailableError`, instead of starting "healthy" on an unreachable Redis. Unset: start
   * at once, commands wait for the connection (bounded by `commandTimeoutMs`).
   * @default undefined (off)
   * @example connectTimeoutMs: 5_000
   */
  connectTimeoutMs?: number;
  /**
   * Boot check of Redis's `maxmemory-policy` on every master (the node, Sentinel's master, each
   * Cluster master, each of `nodes`). Any policy but `noeviction` lets Redis delete keys when it
   * reaches `maxmemory`: a held lock's key evicted is a second grant while the first holder's
   * `signal` stays unaborted, and evicted queue keys are lost tasks. `'warn'`: one warning per such
   * master (policy, master, fix); `'fail'`: the start fails with `RedisLockOptionsError`;
   * `'ignore'`: no check. Read with `CONFIG GET`, else `INFO memory`; when both are refused the
   * warning says the policy could not be checked (in every mode but `'ignore'`, never fatal).
   * Each call is bounded by `connectTimeoutMs` (else 1 s) and `commandTimeoutMs`. See
   * docs/redis-setup.md.
   * @default 'warn'
   * @example evictionPolicy: 'fail'
   */
  evictionPolicy?: EvictionPolicyMode;
  /** Defaults of the queue and its workers. */
  queue?: QueueDefaults;
}
