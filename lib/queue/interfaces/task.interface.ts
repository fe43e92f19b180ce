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
   * The W3C `traceparent` of the span that enqueued it, when the producer was traced (an
   * OpenTelemetry SDK registered); the worker's `process` span continues that trace.
   */
  readonly traceparent?: string;
}

/** A task in the dead-letter set, as returned by `deadLetters`. */
export interface DeadTask<P = unknown> {
  readonly queue: string;
  readonly id: string;
  /** When it was moved to the dead-letter set: epoch ms on the Redis clock. */
  readonly diedAt: number;
  /** Attempts it used. */
  readonly attempts: number;
  readonly payload: P;
}

/** Task counts of one queue, taken at one instant. */
export interface QueueStats {
  /** Due now (waiting for a worker). */
  ready: number;
  /** Due later (`delayMs`, or retry backoff). */
  delayed: number;
  /** Leased by a worker, including expired leases not yet returned by a `claim`. */
  leased: number;
  /** In the dead-letter set. */
  dead: number;
  /** `pause(queue)` is in effect: workers claim nothing until `resume(queue)`. */
  paused: boolean;
}

/** The states `QueueService.list` and `get` report. */
export type QueueTaskState = 'ready' | 'delayed' | 'leased' | 'dead';

/** One task as `QueueService.get` and `list` see it. */
export interface QueueTaskInfo<P = unknown> {
  readonly queue: string;
  readonly id: string;
  readonly state: QueueTaskState;
  /**
   * Epoch ms on the Redis clock: the due time (ready, delayed), the lease expiry (leased) or the
   * time of death (dead).
   */
  readonly time: number;
  /** Claims so far. */
  readonly attempts: number;
  readonly payload: P;
  /** Message of the last failure (a handler's error, or 'lease expired'); absent when none. */
  readonly lastError?: string;
  /** When it was (last) enqueued: epoch ms on the Redis clock. */
  readonly enqueuedAt?: number;
  /** Its priority; absent when none. */
  readonly priority?: number;
  /** Its group; absent when none. */
  readonly group?: string;
}

/**
 * A queue name that carries the payload type of its tasks, from `defineQueue<P>(name)`: pass it
 * wherever a queue name goes, and `enqueue` requires a `P` payload while handlers get
 * `LeasedTask<P>`.
 */
export interface TypedQueue<P> {
  readonly name: string;
  /** Type only: never set. */
  readonly __payload?: (payload: P) => P;
}

/** What `nack` did: `'retried'` (queued again), `'dead'` (dead letter) or `false` (stale lease). */
export type NackResult = 'retried' | 'dead' | false;
