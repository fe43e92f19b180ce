// The records of a queue's tasks that options and their checks name (a task's own options, the
// task a backoff function gets): here, below the module options and the queue folder, which both
// import them (lib/queue/interfaces/task.interface.ts re-exports them).

/** A task id as given to `enqueue`: a non-empty string, or a finite number (stored as its string). */
export type QueueTaskId = string | number;

/** A queued task, as returned by `pop` and `top`. */
export interface Task<P = unknown> {
  /** The queue it belongs to. */
  readonly queue: string;
  /** The id given to `enqueue` (a number id comes back as its string). */
  readonly id: string;
  /** Due time: epoch ms on the Redis clock. Pass it to `dequeue` for compare-and-remove. */
  readonly score: number;
  /**
   * The payload given to `enqueue`, after a JSON round trip; `undefined` when none was given.
   * Its type is what the caller declared (`claim<P>`, a `TypedQueue<P>`, the handler's
   * parameter): declare `P | undefined` for a queue whose tasks may have none.
   */
  readonly payload: P;
}

/** A task leased by `claim` (or by a worker): only its holder can `ack`, `nack` or extend it. */
export interface LeasedTask<P = unknown> extends Task<P> {
  /** Identifies this lease; `ack`/`nack`/`extendLease`/`release` with an older one do nothing. */
  readonly leaseToken: string;
  /** Which attempt this is: 1 on the first claim, +1 on every later one. */
  readonly attempt: number;
  /** When the lease expires unless extended: epoch ms on the Redis clock. */
  readonly leaseExpiresAt: number;
  /** When it was enqueued: epoch ms on the Redis clock (absent for tasks of older versions). */
  readonly enqueuedAt?: number;
  /**
   * Rises with every lease of the queue's tasks, so a later lease of this task has a higher fence:
   * pass it with your writes (`FencedStore`, or a `fence` column checked by the database) and a
   * stale worker whose lease expired cannot overwrite the work of the one that took over.
   */
  readonly fence: number;
  /**
   * The task's name given to `enqueue` (`name`), if any: a worker with named handlers runs the
   * handler registered for it (`@QueueWorker(queue, { name })`).
   */
  readonly name?: string;
  /** The task's own options given to `enqueue` (`maxAttempts`, `backoff`, `timeoutMs`), if any. */
  readonly options?: TaskOwnOptions;
  /**
   * The W3C `traceparent` of the span that enqueued it, when the producer was traced (an
   * OpenTelemetry SDK registered); the worker's `process` span continues that trace.
   */
  readonly traceparent?: string;
  /** The flow parent this task is a child of (`enqueueFlow`), if any. */
  readonly parent?: { readonly queue: string; readonly id: string };
}

/**
 * Delay before a failed task is tried again: `fixed` waits `delayMs` every time; `exponential`
 * waits `delayMs * 2^(attempt - 1)`, at most `maxDelayMs` (default one hour, or `delayMs` when
 * longer). `jitter: true` draws each delay between 50 % and 100 % of that (tasks that failed
 * together come back apart).
 */
export interface BackoffOptions {
  type: 'fixed' | 'exponential';
  /** An integer from 0 to 86,400,000 (a day). */
  delayMs: number;
  /** From `delayMs` to 86,400,000. @default max(3600000, delayMs) (exponential) */
  maxDelayMs?: number;
  /** @default false */
  jitter?: boolean;
}

/**
 * The failure policy and timeout a task was enqueued with (they win over its worker's), and its
 * deadline.
 */
export interface TaskOwnOptions {
  readonly maxAttempts?: number;
  readonly backoff?: BackoffOptions;
  readonly timeoutMs?: number;
  /** Epoch ms (`expiresAt`, or the enqueue's clock + `expiresInMs`): not started by then, it expires. */
  readonly expiresAt?: number;
}
