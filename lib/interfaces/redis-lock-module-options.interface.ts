import type { Cluster, ClusterNode, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import type {
  KeepBounds,
  QueueWorkerOptions,
  RetryLogLevel,
} from '../queue/interfaces/queue-options.interface';
import type { WaitForReplicasOptions } from './lock-options.interface';

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

/** Options of one queue (module option `queue.queues[name]`); unset ones are the module's. */
export interface QueueOwnOptions {
  /**
   * Largest payload, progress value or log line of this queue, in UTF-8 bytes of its JSON text
   * (1 to 536,870,912).
   * @default the module's `queue.maxPayloadBytes` (1048576)
   * @example queues: { thumbnails: { maxPayloadBytes: 16_384 } }
   */
  maxPayloadBytes?: number;
}

/** Options of one named handler from configuration (`queue.workers[queue].names[name]`). */
export interface NamedHandlerConfig {
  /** Tasks of this name run at the same time: wins over the handler's own and the queue's. */
  concurrency?: number;
  /** Run timeout of each attempt of this name, in ms: wins over the handler's own and the queue's. */
  timeoutMs?: number;
}

/**
 * Worker options of one queue from configuration (module option `queue.workers[queue]`): they
 * win over the options each worker of the queue on this instance is started with (`@QueueWorker`,
 * `process`), so `forRootAsync` can read them from `ConfigService` per environment. Every worker
 * option but `batch` and `name`; a bad value fails the start with `RedisLockOptionsError` naming
 * the queue and the option (`queue.workers.emails.concurrency`).
 */
export interface QueueWorkersConfig extends Omit<QueueWorkerOptions, 'batch' | 'name'> {
  /**
   * Named handlers' own options, by name (`@QueueWorker(queue, { name })`): `concurrency` and
   * `timeoutMs` here win over the queue's above.
   * @example names: { welcome: { concurrency: 20 }, invoice: { concurrency: 2, timeoutMs: 60_000 } }
   */
  names?: Record<string, NamedHandlerConfig>;
}

/** Defaults of `QueueService` and its workers. */
export interface QueueDefaults {
  /**
   * How long a claimed task stays leased before it returns to the queue, in ms.
   * @default 30000
   */
  leaseMs?: number;
  /**
   * Attempts (claims) before a failing task moves to the dead-letter set (an integer from 1 to
   * 1,000,000).
   * @default 5
   */
  maxAttempts?: number;
  /**
   * Base delay of the exponential retry backoff of workers, in ms.
   * @default 1000
   */
  backoffMs?: number;
  /**
   * Tasks a worker runs at the same time.
   * @default 1
   */
  concurrency?: number;
  /**
   * How long shutdown waits for running handlers before returning their tasks to the queue, in ms.
   * @default 10000
   */
  drainTimeoutMs?: number;
  /**
   * Tasks of one group leased at once, across all workers.
   * @default 1
   */
  groupConcurrency?: number;
  /**
   * How long, and how many, completed tasks are kept with their result, payload and finish time
   * (`get`, `waitFor`, the dashboard); meanwhile `enqueue` of such an id is refused (an
   * idempotency window). `{ ageMs: 0, count: 0 }`: not kept (deleted when acked). Past `count`
   * the oldest are deleted down to `count` less a tenth of it (at most 100), so between that and
   * `count` are kept.
   * @default { ageMs: 86400000, count: 1000 } (a day, 1,000 tasks)
   */
  keepCompleted?: KeepBounds;
  /**
   * Bounds of the dead-letter set (older or surplus dead tasks are deleted).
   * @default { ageMs: 604800000, count: 10000 } (7 days, 10,000 tasks)
   */
  keepDead?: KeepBounds;
  /**
   * The log level of a failed attempt that will be retried (a retry is often expected: a flaky
   * dependency, a lock held elsewhere). A task that goes to the dead-letter set is always logged
   * as an error. `'off'` logs nothing (the `task.retried` event still fires).
   * @default 'warn'
   * @example queue: { retryLogLevel: 'debug' }
   */
  retryLogLevel?: RetryLogLevel;
  /**
   * Length of each queue's event stream (`events`, `waitFor`, `@OnQueueEvent`), trimmed
   * approximately (`XADD MAXLEN ~`) by the scripts that write it: 0 to 1,000,000; `0` writes no
   * events, and `waitFor` / `events` then throw.
   * @default 10000
   */
  eventsMaxLen?: number;
  /**
   * Largest result a handler may return, in bytes of its JSON: past it the attempt fails with a
   * `QueueError` naming the task (1 to 16 MiB).
   * @default 65536
   */
  maxResultBytes?: number;
  /**
   * Largest value one call may store, in UTF-8 bytes of its JSON text (1 to 536,870,912, Redis's
   * string limit): a task's payload (`enqueue`, `enqueueFlow`, `schedule`, `task.update`), a
   * progress value (`task.progress`) and a log line (`task.log`). Past it the call throws
   * `PayloadTooLargeError` naming the size and the limit, and writes nothing. A queue's own bound
   * under `queues` wins.
   * @default 1048576 (1 MiB)
   * @example queue: { maxPayloadBytes: 65_536 }
   */
  maxPayloadBytes?: number;
  /**
   * Options of single queues, by queue name, that win over the module-wide ones above (today:
   * `maxPayloadBytes`). Read by every call of this instance on that queue (producers and workers).
   * @default {}
   * @example queue: { queues: { thumbnails: { maxPayloadBytes: 16_384 } } }
   */
  queues?: Record<string, QueueOwnOptions>;
  /**
   * Worker options by queue name, from configuration: they win over the options of every worker
   * of that queue on this instance (the decorator's, `process`'s), named handlers included (their
   * `concurrency` and `timeoutMs` per name under `names`). Unlike `queues`, which every call on a
   * queue reads (producers too), these concern only this instance's workers.
   * @default {}
   * @example
   * queue: { workers: { emails: { concurrency: config.get('EMAIL_CONCURRENCY'), limiter: { max: 100, durationMs: 1_000 } } } }
   */
  workers?: Record<string, QueueWorkersConfig>;
  /**
   * Every queue's bound of tasks queued and running (1 to 1,000,000,000), counted inside the
   * enqueue script: past it `enqueue` throws `QueueFullError` (HTTP: 503 with `Retry-After`) and
   * adds nothing. A queue's own bound (`QueueService.setMaxSize`) wins.
   * @default undefined (no bound)
   */
  maxSize?: number;
  /**
   * Queue writes (`enqueue`, `ack`, and the acks of workers) are followed by `WAIT replicas
   * timeoutMs` — the lock's option, same shape: fewer acknowledgements throw
   * `QueueReplicationError` (the write may be lost on failover); a master with fewer connected
   * replicas refuses the write unsent. Per call, `enqueue`'s / `ack`'s own `waitForReplicas` wins
   * (`false`: none).
   * @default undefined (no wait)
   */
  waitForReplicas?: WaitForReplicasOptions | false;
}

export type { RetryLogLevel };

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
   * `***` (README, "Errors").
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
   * fenced when `fencing` is on: a grant's fence is the highest of the granting nodes' counters,
   * written back to a majority before the grant is reported (docs/scaling.md). The queue keeps
   * using `redis`.
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
   * Prefix of every Redis key and channel the module uses.
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
  /** Default fallback poll interval while waiting for a lock, in ms. @default 100 */
  retryIntervalMs?: number;
  /** Default fairness (FIFO line with direct handoff). @default true */
  fair?: boolean;
  /** Default fencing (per-key counter returned as `lock.fence`). @default true */
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
   * How long a lock's fence counter lives after it was created, in ms (at least 1000). A counter
   * that is gone is created again starting at Redis `TIME` in microseconds, which is above every
   * fence the old one handed out, so fences stay strictly increasing while counters of idle lock
   * names disappear. This rests on Redis's clock (the master's, also after a failover) never going
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
