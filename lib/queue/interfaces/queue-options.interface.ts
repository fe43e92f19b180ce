import type { WaitForReplicasOptions } from '../../interfaces/lock-options.interface';
import type { BackoffOptions, LeasedTask, RunningTask } from './task.interface';

export type { BackoffOptions };

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
   * there — or that has no name — ends dead at once with `UnknownTaskNameError`. Their other
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

/**
 * A batch worker's handler (`{ batch: { size } }`): gets up to `size` tasks. Resolve to complete
 * them all (an array as long as `tasks` gives each its result); `tasks[i].fail(error)` fails one;
 * throwing fails every task not failed otherwise.
 */
export type QueueBatchHandler<P = unknown> = (
  tasks: RunningTask<P>[],
) => unknown | Promise<unknown>;

/**
 * Runs one task. What it resolves to is the task's result (any JSON value, kept per
 * `keepCompleted`); throw (or reject) to retry it per the failure policy, or throw
 * `UnrecoverableTaskError` to send it to the dead letters at once. `task.signal` (also passed as
 * `signal`) aborts on cancel, run timeout, lost lease and shutdown. A handler declared with
 * exactly one parameter, `(task) => ...`, is passed no second argument (`undefined`): creating a
 * signal per task costs more CPU than the rest of a task's bookkeeping, so it is made only when
 * read; use `task.signal`.
 */
export type QueueHandler<P = unknown> = (
  task: RunningTask<P>,
  signal: AbortSignal,
) => unknown | Promise<unknown>;

/** A running worker, returned by `QueueService.process`. */
export interface QueueWorkerHandle {
  /** The queue it works on. */
  readonly queue: string;
  /** Tasks (for a batch worker: batches) it runs at the same time; see `setConcurrency`. */
  readonly concurrency: number;
  /**
   * Changes the worker's `concurrency` at runtime: raised, it claims more at once; lowered, its
   * running tasks finish and it claims again only once fewer run than `n`.
   * @throws RedisLockOptionsError unless `n` is an integer from 1 to 10,000
   * @example handle.setConcurrency(20);
   */
  setConcurrency(n: number): void;
  /**
   * Stops claiming, waits up to `drainTimeoutMs` for running handlers, then gives the unfinished
   * tasks back to the queue without counting the attempt. Idempotent.
   */
  close(): Promise<void>;
}
