/** What every task event carries. */
export interface TaskEventBase {
  /** The queue of the task. */
  readonly queue: string;
  /** The task id. */
  readonly id: string;
  /** The task's name (`enqueue`'s `name`), when it has one. */
  readonly name?: string;
  /** Which attempt this was (1 on the first claim). */
  readonly attempt: number;
  /** From enqueue to this claim, in ms (Redis clock); absent when the enqueue time is unknown. */
  readonly waitMs?: number;
  /** How long the handler ran, in ms. */
  readonly runMs: number;
}

/** A handler threw: what it threw, and what happens next. */
export interface TaskFailedEvent extends TaskEventBase {
  readonly error: unknown;
}

/** A failed task was queued again. */
export interface TaskRetriedEvent extends TaskFailedEvent {
  /** It is due again this many ms from now. */
  readonly delayMs: number;
}

/** A task this worker ran ended cancelled (`QueueService.cancel`). */
export interface TaskCancelledEvent extends TaskEventBase {
  /** The cancel's reason, when one was given. */
  readonly reason?: string;
}

/** A task this worker ran passed its run timeout (its attempt failed with `TaskTimeoutError`). */
export interface TaskTimeoutEvent extends TaskEventBase {
  readonly timeoutMs: number;
}

/** A lock of this instance was lost (it expired or was taken over) before it was released. */
export interface LockLostEvent {
  readonly keys: readonly string[];
  /**
   * Why it was lost: its TTL ran out (`expired`), the extension found another holder (`taken`),
   * Redis could not be reached in time (`unreachable`), or the module shut down while it was
   * held and released it (`shutdown`).
   */
  readonly reason: 'expired' | 'taken' | 'unreachable' | 'shutdown';
}

/** An acquire gave up after waiting. */
export interface LockTimeoutEvent {
  readonly keys: readonly string[];
  /** How long it waited, in ms. */
  readonly waitedMs: number;
  readonly reason: 'timeout' | 'aborted';
}

/** A worker's Redis call failed (it pauses and tries again). */
export interface WorkerErrorEvent {
  readonly queue: string;
  /** The call that failed: 'claim', 'ack', 'nack', 'extendLease', 'release', 'BLPOP'. */
  readonly operation: string;
  readonly error: unknown;
}

/** Every event of `RedisLockEvents`, by name, with its payload. */
export interface RedisLockEventMap {
  /** A worker's handler resolved and its task was acked. */
  'task.completed': TaskEventBase;
  /** A worker's handler threw (followed by `task.retried` or `task.dead`). */
  'task.failed': TaskFailedEvent;
  'task.retried': TaskRetriedEvent;
  /** A failed task used its last attempt and moved to the dead-letter set. */
  'task.dead': TaskFailedEvent;
  /** A running task was cancelled and ended `cancelled` (never retried). */
  'task.cancelled': TaskCancelledEvent;
  /** A running task passed its run timeout (followed by `task.failed` and its retry or death). */
  'task.timeout': TaskTimeoutEvent;
  'worker.error': WorkerErrorEvent;
  /**
   * A lock of this instance was found lost: an extension found it gone or taken, it could not be
   * extended before it expired, or it was released (or swept) after its TTL ran out.
   */
  'lock.lost': LockLostEvent;
  /** An `acquire` / `tryAcquire` / `withLock` wait ran out (or its signal aborted it). */
  'lock.timeout': LockTimeoutEvent;
}

/** The name of an event of `RedisLockEvents`. */
export type RedisLockEventName = keyof RedisLockEventMap;
