import type { LeasedTask } from './task.interface';

/** Options of `QueueService.enqueue`. */
export interface EnqueueOptions {
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
   * `true` sets its due time to the new one (and its payload, when `payload` is given).
   * A leased id is never changed.
   * @default false
   */
  replace?: boolean;
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
}

/** Options of `QueueService.nack`. */
export interface NackOptions {
  /**
   * The task is due again this many ms after now.
   * @default 0
   */
  delayMs?: number;
  /**
   * When the task's attempt count reached this, it goes to the dead-letter set instead.
   * @default the module's `queue.maxAttempts` (5)
   */
  maxAttempts?: number;
}

/** Options of a queue worker (`@QueueWorker` or `QueueService.process`); unset ones come from the module's `queue` options. */
export interface QueueWorkerOptions {
  /**
   * Tasks this worker runs at the same time.
   * @default 1
   */
  concurrency?: number;
  /**
   * Lease of each task, in ms; renewed every `leaseMs / 3` while the handler runs, so it only
   * bounds how long a crashed worker's task waits before another worker gets it.
   * @default 30000
   */
  leaseMs?: number;
  /**
   * Attempts before a failing task moves to the dead-letter set.
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
}

/**
 * Runs one task. Resolve to ack it; throw (or reject) to retry it with backoff. `signal` aborts
 * when the lease is lost or when shutdown gave the task back; the task will then run again, so
 * stop early if you can.
 */
export type QueueHandler<P = unknown> = (
  task: LeasedTask<P>,
  signal: AbortSignal,
) => unknown | Promise<unknown>;

/** A running worker, returned by `QueueService.process`. */
export interface QueueWorkerHandle {
  /** The queue it works on. */
  readonly queue: string;
  /**
   * Stops claiming, waits up to `drainTimeoutMs` for running handlers, then gives the unfinished
   * tasks back to the queue without counting the attempt. Idempotent.
   */
  close(): Promise<void>;
}
