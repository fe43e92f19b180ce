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
