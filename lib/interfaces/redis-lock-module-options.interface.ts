import type { Cluster, ClusterNode, ClusterOptions, Redis, RedisOptions } from 'ioredis';

/** Creates an ioredis `Cluster` client for the module (closed by the module on shutdown). */
export interface RedisClusterConnectionOptions {
  cluster: ClusterNode[];
  options?: ClusterOptions;
}

/** Where the module's Redis is. */
export type RedisConnectionOption =
  string | RedisOptions | Redis | Cluster | RedisClusterConnectionOptions;

/** Defaults of `QueueService` and its workers. */
export interface QueueDefaults {
  /**
   * How long a claimed task stays leased before it returns to the queue, in ms.
   * @default 30000
   */
  leaseMs?: number;
  /**
   * Attempts (claims) before a failing task moves to the dead-letter set.
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
}

/** Options of `RedisLockModule.forRoot` / `forRootAsync`. */
export interface RedisLockModuleOptions {
  /**
   * The Redis to use: a URL (`redis://host:6379/0`), ioredis options, an ioredis `Redis` or
   * `Cluster` instance, or `{ cluster: nodes, options }`. An instance you pass in is never closed
   * by the module; a client the module creates is closed on application shutdown.
   * @default 'redis://127.0.0.1:6379'
   */
  redis?: RedisConnectionOption;
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
  /** Default lock TTL in ms. @default 30000 */
  ttlMs?: number;
  /** Default wait for a lock in ms (`0`: try once). @default 0 */
  waitMs?: number;
  /** Default fallback poll interval while waiting for a lock, in ms. @default 100 */
  retryIntervalMs?: number;
  /** Default fairness (FIFO line with direct handoff). @default true */
  fair?: boolean;
  /** Default fencing (per-key counter returned as `lock.fence`). @default true */
  fencing?: boolean;
  /** Defaults of the queue and its workers. */
  queue?: QueueDefaults;
}
