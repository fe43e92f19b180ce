import type { RunningTask } from './task.interface';

// The option types live below the module options and this folder (both import them).
export type { BackoffOptions } from '../../interfaces/queue-task.interface';
export type {
  BackoffFunction,
  BatchOptions,
  ClaimOptions,
  EnqueueOptions,
  KeepBounds,
  NackOptions,
  QueueWorkerOptions,
  RetryLogLevel,
  WorkerRateLimit,
} from '../../interfaces/queue-options.interface';

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

/**
 * One worker of a queue on some instance, from `QueueService.workers` (as BullMQ's `getWorkers`).
 * Read from a registry each instance writes every 5 s: `running` is as of `heartbeatAt`; an
 * instance that died drops out 15 s after its last heartbeat.
 */
export interface QueueWorkerInfo {
  /** The instance's `instanceId` (module option; default `<hostname>:<pid>`). */
  readonly instance: string;
  /** The host it runs on (`os.hostname()`). */
  readonly host: string;
  /** Its process id. */
  readonly pid: number;
  /** Tasks (batch worker: batches) it runs at the same time, now (`setConcurrency` included). */
  readonly concurrency: number;
  /** Tasks its handlers were running at `heartbeatAt`. */
  readonly running: number;
  /** The task names it handles (named handlers); empty: every task of the queue. */
  readonly names: readonly string[];
  /** When it started: epoch ms on its instance's clock. */
  readonly since: number;
  /** When its entry was last written: epoch ms on the Redis clock. */
  readonly heartbeatAt: number;
}

/**
 * One minute of a queue's history, from `QueueService.metrics`: what ended in that minute on
 * every instance.
 */
export interface QueueMetricsPoint {
  /** The minute's start: epoch ms (each instance's clock decides its minute). */
  readonly time: number;
  /** Tasks that completed. */
  readonly completed: number;
  /** Failed attempts that will be retried. */
  readonly failed: number;
  /** Tasks that moved to the dead letters (out of attempts, unrecoverable, stalled too often). */
  readonly dead: number;
  /** Tasks that expired (not started by their `expiresAt`). */
  readonly expired: number;
  /** Tasks that ended cancelled. */
  readonly cancelled: number;
  /**
   * Run time of the completed tasks, median and 95th percentile, in ms (within 10 %); absent when
   * none completed. Minutes of several instances: the mean of theirs, weighted by completed tasks.
   */
  readonly p50Ms?: number;
  readonly p95Ms?: number;
}

/** Options of `QueueService.metrics`. */
export interface QueueMetricsOptions {
  /** From this time (epoch ms or `Date`). @default 1 hour before `to` */
  from?: number | Date;
  /** Up to this time (epoch ms or `Date`). @default now */
  to?: number | Date;
}

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
