/**
 * What happened to a task (or a queue), as written to the queue's event stream by the script
 * that made the change (docs/queue.md, "Events"):
 * - `enqueued`  added (or placed again by `replace`, `requeueDead`, a schedule tick; a flow parent
 *               whose children all finished)
 * - `waiting-children` a flow parent was added and waits for its children (`enqueueFlow`)
 * - `active`    leased by a worker (`attempt` is the attempt it starts)
 * - `progress`  `task.progress(value)` (`progress`)
 * - `log`       `task.log(line)` added a line (read it with `logs()`)
 * - `completed` finished (`result`, when the handler returned one)
 * - `retrying`  an attempt failed and the task is due again in `delayMs` (`error`)
 * - `dead`      moved to the dead letters (`error`)
 * - `cancelled` `cancel()` ended it, waiting or running (`error` carries the reason)
 * - `expired`   not started by its `expiresAt` (`expiresInMs`): it ends without running
 * - `stalled`   its lease ran out (a crashed or frozen worker) and it was taken back
 * - `deduplicated` not added: another task holds its `deduplication.id` (`keptTaskId`)
 * - `removed`   `remove()` deleted it
 * - `delayed`   back to waiting without spending an attempt (`task.delay(ms)`; a worker that shut
 *               down gives its tasks back with `delayMs` 0)
 * - `paused` / `resumed` the queue (no `taskId`)
 * - `obliterated` the queue was deleted (`obliterate()`; no `taskId`; the first entry of the new
 *               stream)
 */
export type QueueEventType =
  | 'enqueued'
  | 'active'
  | 'progress'
  | 'log'
  | 'completed'
  | 'retrying'
  | 'dead'
  | 'cancelled'
  | 'expired'
  | 'stalled'
  | 'removed'
  | 'deduplicated'
  | 'delayed'
  | 'paused'
  | 'resumed'
  | 'obliterated'
  | 'waiting-children';

/** Every `QueueEventType`, in the order above. */
export const QUEUE_EVENT_TYPES: readonly QueueEventType[] = [
  'enqueued',
  'active',
  'progress',
  'log',
  'completed',
  'retrying',
  'dead',
  'cancelled',
  'expired',
  'stalled',
  'removed',
  'deduplicated',
  'delayed',
  'paused',
  'resumed',
  'obliterated',
  'waiting-children',
];

/** A task's failure as stored and reported: what survives a JSON round trip of an `Error`. */
export interface TaskError {
  name: string;
  message: string;
  stack?: string;
}

/** One entry of a queue's event stream. */
export interface QueueEvent {
  /** The stream entry id (`<ms>-<seq>`): pass it as `from` to resume after this event. */
  readonly eventId: string;
  readonly type: QueueEventType;
  readonly queue: string;
  /** The task (absent for `paused` / `resumed`). */
  readonly taskId?: string;
  /** When it happened: epoch ms on the Redis clock. */
  readonly at: number;
  /** `active`, `completed`, `retrying`, `dead`, `stalled`: the attempt concerned. */
  readonly attempt?: number;
  /** `completed`: the handler's return value (absent when it returned `undefined`). */
  readonly result?: unknown;
  /** `retrying`, `dead`, `cancelled`: the failure or the reason. */
  readonly error?: TaskError;
  /** `progress`: the value given to `task.progress()`. */
  readonly progress?: unknown;
  /** `enqueued` (when delayed), `retrying`, `delayed`: due again this many ms later. */
  readonly delayMs?: number;
  /** `enqueued` (by `enqueue`), `active`: the task's name, when it has one. */
  readonly name?: string;
  /** `deduplicated`: the task that holds the deduplication id (the call's own id is `taskId`). */
  readonly keptTaskId?: string;
}

/**
 * How a task ended, from `QueueService.waitFor` (`expired`: not started by its `expiresAt`, never
 * run; its `error` is `{ name: 'TaskExpiredError', message: 'expired before it started' }`).
 */
export type TaskOutcome<R = unknown> =
  | { readonly state: 'completed'; readonly result: R }
  | { readonly state: 'dead' | 'cancelled' | 'expired'; readonly error: TaskError };

/** Options of `QueueService.waitFor`. */
export interface WaitForOptions {
  /**
   * Rejects with `QueueWaitTimeoutError` when the task has not finished this many ms after the
   * call: an integer from 1 to 86,400,000 (a day).
   * @default 30000
   */
  timeoutMs?: number;
}

/** Options of `QueueService.events`. */
export interface QueueEventsOptions {
  /**
   * Where to start: `'now'` (only events after the subscription), `'start'` (every event still in
   * the stream), or an `eventId` (the events after it: resume after a reconnect).
   * @default 'now'
   */
  from?: 'now' | 'start' | string;
}
