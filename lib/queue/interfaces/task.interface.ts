import type { LeasedTask } from '../../interfaces/queue-task.interface';
import type { ChildFailure, TaskChildren } from './flow.interface';
import type { TaskError } from './queue-event.interface';

// The task records options name live below the module options and this folder.
export type {
  BackoffOptions,
  LeasedTask,
  QueueTaskId,
  Task,
  TaskOwnOptions,
} from '../../interfaces/queue-task.interface';

/**
 * The task a worker's handler gets: a `LeasedTask` it can report on and steer while it runs.
 * @example
 * \@QueueWorker('exports')
 * async run(task: RunningTask<{ rows: number }>) {
 *   for (let done = 0; done < task.payload.rows; done += 1000) {
 *     task.signal.throwIfAborted(); // cancel, timeout, lost lease, shutdown
 *     await writeChunk(done, task.fence);
 *     await task.progress({ done });
 *   }
 * }
 */
export interface RunningTask<P = unknown> extends LeasedTask<P> {
  /**
   * Aborts when the task is cancelled (`TaskCancelledError`), passes its run timeout
   * (`TaskTimeoutError`), loses its lease, or is given back on shutdown: stop early, its outcome
   * will not count.
   */
  readonly signal: AbortSignal;
  /**
   * Stores `value` (any JSON value) as the task's progress (`get`, the dashboard) and writes a
   * `progress` event. Rejects with a `QueueError` when the value is not JSON or the lease was lost,
   * and with `PayloadTooLargeError` (storing nothing) when its JSON is past the queue's
   * `maxPayloadBytes`.
   */
  progress(value: unknown): Promise<void>;
  /**
   * Appends `line` to the task's log (read with `QueueService.logs`; deleted with the task) and
   * writes a `log` event. The log keeps its last 100 lines; a line longer than 1,000 characters
   * is cut there. Rejects with a `QueueError` when `line` is not a string or the lease was lost,
   * and with `PayloadTooLargeError` when the (cut) line's JSON is past the queue's
   * `maxPayloadBytes`.
   * @example await task.log(`charged ${amount}`);
   */
  log(line: string): Promise<void>;
  /**
   * Replaces the task's stored payload (a step job keeps its state there for its next attempt);
   * `task.payload` shows it at once. Rejects like `progress`. After `task.delay()` it still
   * applies while the task waits (BullMQ's order: delay, then update); it rejects with
   * `QueueError` once the task was claimed again or finished.
   * @example
   * await task.delay(60_000);
   * await task.update({ ...task.payload, step: 'charge' });
   */
  update(payload: P): Promise<void>;
  /**
   * Puts the task back, delayed `ms` (0 to a day), without spending an attempt: whatever the
   * handler returns or throws afterwards is ignored. Rejects when the lease was lost. The handler
   * may still `update` the payload (and `progress`) while the task waits.
   */
  delay(ms: number): Promise<void>;
  /**
   * Fails this task's attempt with `error` whatever the handler returns (retried per its failure
   * policy; `UnrecoverableTaskError`: dead at once). Meant for batch workers, where the others of
   * the batch complete.
   */
  fail(error: unknown): void;
  /**
   * A flow parent's children that completed, with their results: `{ 'queue:id': result }`
   * (`undefined` for a child that returned nothing); `{}` for a task without children.
   * @example const { 'payments:charge-42': charge } = await task.childResults();
   */
  childResults<R = unknown>(): Promise<Record<string, R>>;
  /** A flow parent's children that failed (their `onChildFailure` was `'ignore'`), with their errors. */
  childFailures(): Promise<ChildFailure[]>;
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
  /** Completed and kept (`keepCompleted`). */
  completed: number;
  /** Cancelled and kept (`keepDead`). */
  cancelled: number;
  /** Expired (not started by their `expiresAt`) and kept, as completed ones are (`keepCompleted`). */
  expired: number;
  /** Flow parents waiting for their children (`waiting-children`). */
  waitingChildren: number;
}

/**
 * The states `QueueService.list` and `get` report (`waiting-children`: a flow parent whose
 * children have not all finished; `expired`: not started by its `expiresAt`, never run).
 * `completed` and `expired` tasks are there while `keepCompleted` keeps them; `dead` and
 * `cancelled` ones while `keepDead` does.
 */
export type QueueTaskState =
  | 'ready'
  | 'delayed'
  | 'leased'
  | 'completed'
  | 'dead'
  | 'cancelled'
  | 'expired'
  | 'waiting-children';

/** One task as `QueueService.get` and `list` see it. */
export interface QueueTaskInfo<P = unknown> {
  readonly queue: string;
  readonly id: string;
  readonly state: QueueTaskState;
  /** The task's name (`enqueue`'s `name`), if it has one. */
  readonly name?: string;
  /**
   * Epoch ms on the Redis clock: the due time (ready, delayed), the lease expiry (leased), the
   * finish time (completed) or the time of death, cancel or expiry (dead, cancelled, expired).
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
  /** `completed`: the handler's return value (absent when it returned `undefined`). */
  readonly result?: unknown;
  /** `dead` and `cancelled`: the last failure, or the cancel's reason; else the last failure, if any. */
  readonly error?: TaskError;
  /** The last value given to `task.progress()`; absent when none. */
  readonly progress?: unknown;
  /** `completed`, `dead`, `cancelled`, `expired`: when it finished, epoch ms on the Redis clock. */
  readonly finishedAt?: number;
  /** A flow parent's children: how many, how many completed and failed, which are missing. */
  readonly children?: TaskChildren;
}

/**
 * A queue name that carries the payload type of its tasks, from `defineQueue<P>(name)`: pass it
 * wherever a queue name goes (a `TypedQueue<Order>` is also a `TypedQueue<unknown>`), and
 * `enqueue` requires a `P` payload while handlers get `RunningTask<P>`.
 * @example
 * const ORDERS = defineQueue<Order>('orders');
 * await queues.enqueue(ORDERS, order.id, { payload: order });
 * const stats = await queues.stats(ORDERS);
 */
export interface TypedQueue<P> {
  readonly name: string;
  /**
   * Type only: never set. Covariant in `P` (a producer of `P`), so a typed queue goes where a
   * queue of a wider payload type (`unknown`) is expected.
   */
  readonly __payload?: () => P;
}

/**
 * A queue name, or a `TypedQueue` that carries its payload type.
 * @example
 * const a: QueueName = 'orders';
 * const b: QueueName<Order> = defineQueue<Order>('orders');
 */
export type QueueName<P = unknown> = string | TypedQueue<P>;

/**
 * What `nack` did: `'retried'` (queued again), `'dead'` (dead letter), `'cancelled'` (a cancel
 * was asked for it: it ended cancelled) or `false` (stale lease).
 */
export type NackResult = 'retried' | 'dead' | 'cancelled' | false;
