// The queue's option types: the module's `queue` options and those of its calls and workers. Here,
// below both users — the module options (lib/options) and the queue folder — so that neither
// imports upward (lib/queue/interfaces/queue-options.interface.ts re-exports them).
import type { WaitForReplicasOptions } from './lock-options.interface';
import type { BackoffOptions, LeasedTask } from './queue-task.interface';

/** A Nest logger level, or `'off'`. */
export type RetryLogLevel = 'error' | 'warn' | 'log' | 'debug' | 'verbose' | 'off';

/**
 * A worker's own backoff: the delay in ms (rounded, clamped to 0 … a day) before the task is due
 * again after `attempt` failed with `error`.
 */
export type BackoffFunction = (attempt: number, error: unknown, task: LeasedTask) => number;

/** A worker's rate limit (`limiter`, `groupLimiter`): at most `max` tasks started in any `durationMs` window. */
export interface WorkerRateLimit {
  /** Tasks started per window at most: an integer from 1 to 1,000,000. */
  max: number;
  /** Length of the window in ms: an integer from 1 to 86,400,000 (a day). */
  durationMs: number;
}

/** How long finished (or dead) task ids are kept: both bounds apply. */
export interface KeepBounds {
  /** Kept this long after they finished, in ms. */
  ageMs: number;
  /** At most this many are kept (the oldest go first). */
  count: number;
}

/** Options of `QueueService.enqueue`. */
export interface EnqueueOptions {
  /**
   * The task's name (BullMQ's job name): a worker with named handlers
   * (`@QueueWorker(queue, { name })`) runs the handler registered for it; a worker without a name
   * runs every task. Shown by `get`, `list`, the `enqueued` and `active` events and the dashboard.
   * A non-empty string without NUL, at most 512 bytes; the same for every id of the call.
   * @default none
   * @example await queues.enqueue('emails', user.id, { name: 'welcome', payload: { to: user.email } });
   */
  name?: string;
  /**
   * Deduplication by an id other than the task id: while the task that holds `id` is unfinished
   * (queued, delayed or running), or for `ttlMs` after it was added when `ttlMs` is given, an
   * enqueue with the same `id` adds nothing (resolves 0) and writes a `deduplicated` event. Only
   * with a single task id. `id`: a non-empty string of at most 512 bytes; `ttlMs`: an integer from
   * 1 to 10 years.
   * @default none
   * @example await queues.enqueue('sync', randomUUID(), { deduplication: { id: `user:${userId}` } });
   */
  deduplication?: {
    id: string;
    ttlMs?: number;
    /**
     * A call deduplicated while the holding task runs (is leased) is kept, the last one winning,
     * and added when that task finishes (completed, dead or cancelled; not between its retries):
     * at most one running and one waiting per id. Not with `ttlMs`, `priority`, `group`,
     * `replace` or `lifo`.
     * @default false
     */
    keepLastIfActive?: boolean;
  };
  /**
   * Last in, first out: each new id goes before every ready task, so it is claimed (or popped)
   * next; ids of one call are claimed last one first. Only for a task due now without
   * `replace`, `priority` or `group` (`QueueError` otherwise). An id that exists is not moved.
   * @default false
   */
  lifo?: boolean;
  /**
   * The task is due this many ms after now (Redis clock); until then it is delayed.
   * @default 0
   */
  delayMs?: number;
  /**
   * Any JSON value, stored per id and returned with the task (the same payload for every id of
   * an array). Deleted when the task finishes (ack, pop, dequeue). Functions, symbols, BigInt,
   * non-finite numbers and cycles are rejected.
   */
  payload?: unknown;
  /**
   * What to do with an id that is already queued and not leased: `false` keeps it as it is;
   * `true` sets its due time to the new one (and its payload, when `payload` is given; its
   * priority or group, when `priority` or `group` is given — else it keeps its own).
   * A leased id is never changed.
   * @default false
   */
  replace?: boolean;
  /**
   * Priority of the task: an integer from -1000 to 1000, **lower runs sooner** (like BullMQ and
   * Unix `nice`); tasks of one priority run in enqueue order. 0 (the default) is "no priority":
   * negative priorities run before ungrouped tasks without one, positive ones after. A delayed
   * task keeps its priority when it becomes due. Not with `group`.
   * @default 0
   */
  priority?: number;
  /**
   * Group of the task (a non-empty string without NUL, up to 512 bytes). Tasks of one group run
   * in enqueue order, at most `groupConcurrency` at a time across every worker; groups are
   * served round-robin. Not with `priority`.
   */
  group?: string;
  /**
   * This task's attempts before it moves to the dead letters (an integer from 1 to 1,000,000):
   * wins over the worker's.
   * @default the worker's `maxAttempts`
   */
  maxAttempts?: number;
  /** This task's retry backoff: wins over the worker's `backoff` / `backoffMs`. */
  backoff?: BackoffOptions;
  /**
   * This task's run timeout in ms (1 to a day): wins over the worker's `timeoutMs`. At the deadline
   * `task.signal` aborts and the attempt fails with `TaskTimeoutError`.
   */
  timeoutMs?: number;
  /**
   * The task expires unless a worker starts it within this many ms (1 ms to 10 years, from now on
   * this process's clock): past its deadline it is never run (nor retried) and ends `expired`
   * (an `expired` event, `stats().expired`, `waitFor` resolves `{ state: 'expired' }`, kept like
   * completed tasks, per `keepCompleted`). Not with `expiresAt`.
   * @default none (never expires)
   * @example await queues.enqueue('otp-mail', userId, { payload, expiresInMs: 5 * 60_000 });
   */
  expiresInMs?: number;
  /**
   * The task's deadline as a `Date` or epoch ms, compared with the Redis clock: as
   * `expiresInMs`. Not with `expiresInMs`.
   * @default none (never expires)
   */
  expiresAt?: Date | number;
  /**
   * Wait for replicas after the write (`WAIT`; the lock's option, same shape): fewer
   * acknowledgements throw `QueueReplicationError` — the task is on the master but may be lost on
   * failover (enqueueing it again is safe: ids are deduplicated). `false`: no wait.
   * @default the module's `queue.waitForReplicas` (none)
   */
  waitForReplicas?: WaitForReplicasOptions | false;
  /**
   * Debounce window in ms: the task is due `debounceMs` from now, and enqueueing the same id
   * again before it started replaces its payload and moves its due time again (it runs once,
   * `debounceMs` after the last call). Same as `{ delayMs: debounceMs, replace: true }`; not
   * with `delayMs` or `replace`.
   */
  debounceMs?: number;
}

/** Options of `QueueService.claim`. */
export interface ClaimOptions {
  /**
   * How long the tasks stay leased unless extended, in ms.
   * @default the module's `queue.leaseMs` (30000)
   */
  leaseMs?: number;
  /**
   * Expired leases this claim returns go to the dead-letter set instead of back to the queue once
   * their attempt count reached this.
   * @default the module's `queue.maxAttempts` (5)
   */
  maxAttempts?: number;
  /** @see QueueWorkerOptions.groupConcurrency */
  groupConcurrency?: number;
  /** @see QueueWorkerOptions.limiter */
  limiter?: WorkerRateLimit;
  /** @see QueueWorkerOptions.groupLimiter */
  groupLimiter?: WorkerRateLimit;
}

/** Options of `QueueService.nack`. */
export interface NackOptions {
  /**
   * The task is due again this many ms after now.
   * @default 0
   */
  delayMs?: number;
  /**
   * When the task's attempt count reached this, it goes to the dead-letter set instead (a task's
   * own `maxAttempts` wins).
   * @default the module's `queue.maxAttempts` (5)
   */
  maxAttempts?: number;
  /** The failure, stored as the task's error (`get`, the `retrying` / `dead` events). */
  error?: unknown;
}

/** Options of a queue worker (`@QueueWorker` or `QueueService.process`); unset ones come from the module's `queue` options. */
export interface QueueWorkerOptions {
  /**
   * Makes this a named handler: it runs only the tasks enqueued with this `name`, at most
   * `concurrency` of them at a time (its own). The named handlers of a queue share one claim loop
   * on this instance (its slots: their concurrencies added up); a task whose name has no handler
   * there — or that has no name — is given back for a live worker that runs it (another instance,
   * per the workers registry), or ends dead at once with `UnknownTaskNameError` when none does. Their other
   * options (lease, limiter, attempts, backoff…) are the loop's: give them on one handler, or the
   * same on each (`RedisLockOptionsError` otherwise); only `concurrency` and `timeoutMs` are per
   * name. Not with `batch`. Without `name`, a worker runs every task of the queue, named or not.
   * @default undefined (every task)
   * @example @QueueWorker('emails', { name: 'welcome', concurrency: 20 })
   */
  name?: string;
  /**
   * Tasks this worker runs at the same time.
   * @default 1
   */
  concurrency?: number;
  /**
   * Lease of each task, in ms. While the handler runs it is extended before half of it has
   * passed, so it only bounds how long a crashed worker's task waits before another worker gets
   * it.
   * @default 30000
   */
  leaseMs?: number;
  /**
   * Attempts before a failing task moves to the dead-letter set (an integer from 1 to 1,000,000).
   * @default 5
   */
  maxAttempts?: number;
  /**
   * Base of the retry backoff: attempt n is retried after `backoffMs * 2^(n-1)` ms, capped at one
   * hour, jittered to 50–100 %.
   * @default 1000
   */
  backoffMs?: number;
  /**
   * On shutdown, how long to wait for running handlers before their tasks are given back to the
   * queue (without counting the attempt), in ms.
   * @default 10000
   */
  drainTimeoutMs?: number;
  /**
   * Tasks of one group leased at the same time at most, across every worker and instance (give
   * every worker of a queue the same value). 1: a group's tasks run strictly one after another.
   * @default 1
   */
  groupConcurrency?: number;
  /**
   * Rate limit of the queue, shared by every worker on every instance: at most `max` tasks start
   * in any sliding `durationMs` window (a log of the last `max` starts kept in Redis). A limited
   * worker sleeps until the window opens (the claim tells it when). Give every worker of a queue
   * the same limit.
   * @default undefined (no limit)
   */
  limiter?: WorkerRateLimit;
  /**
   * Rate limit of each group: at most `max` tasks of one group start per `durationMs` window
   * (fixed windows, beginning at the group's first start); a group over its limit waits for its
   * next window while other groups run.
   * @default undefined (no limit)
   */
  groupLimiter?: WorkerRateLimit;
  /**
   * Keep completed tasks, with their result, for `ageMs`, at most `count` of them (`get`,
   * `waitFor`); meanwhile `enqueue` of such an id is refused (an idempotency window).
   * `{ ageMs: 0, count: 0 }`: not kept. Past `count` the oldest are deleted down to `count` less
   * a tenth of it (at most 100).
   * @default the module's `queue.keepCompleted` ({ ageMs: 86400000, count: 1000 })
   */
  keepCompleted?: KeepBounds;
  /**
   * Bounds of the dead-letter set: dead tasks older than `ageMs`, and the oldest beyond `count`,
   * are deleted with their payload.
   * @default the module's `queue.keepDead` ({ ageMs: 604800000 (7 days), count: 10000 })
   */
  keepDead?: KeepBounds;
  /**
   * The log level of a failed attempt that will be retried; `'off'` logs nothing.
   * @default the module's `queue.retryLogLevel` ('warn')
   */
  retryLogLevel?: RetryLogLevel;
  /**
   * Run timeout of each attempt, in ms (1 to a day; a task's own `timeoutMs` wins): at the
   * deadline `task.signal` aborts with `TaskTimeoutError`, the attempt fails with it (retried per
   * the failure policy) and the slot is free again — a handler that ignores its signal keeps
   * running, but its outcome is ignored.
   * @default undefined (no timeout)
   */
  timeoutMs?: number;
  /**
   * Retry backoff: `{ type, delayMs, maxDelayMs?, jitter? }` or `(attempt, error, task) => ms`.
   * A task's own `backoff` wins.
   * @default exponential from `backoffMs`, jittered
   */
  backoff?: BackoffOptions | BackoffFunction;
  /**
   * A batch worker: the handler gets an array of up to `size` tasks (`QueueBatchHandler`),
   * waiting at most `maxWaitMs` to fill it (woken by enqueues, never polling). Each task
   * completes with the batch unless the handler called `task.fail(error)` on it; a handler that
   * throws fails every task of the batch. Leases, retries, events and results stay per task
   * (return an array as long as the batch to give each its result). `concurrency` is the number
   * of batches run at once; `timeoutMs` bounds the whole batch (a task's own is not used).
   * @default undefined (one task per call)
   */
  batch?: BatchOptions;
}

/** A batch worker's batch: `size` 1 to 1,000; `maxWaitMs` 0 (default) to 60,000. */
export interface BatchOptions {
  size: number;
  maxWaitMs?: number;
}

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
   * queue: { workers: { emails: { concurrency: Number(config.getOrThrow('EMAIL_CONCURRENCY')), limiter: { max: 100, durationMs: 1_000 } } } }
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
