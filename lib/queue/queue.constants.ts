// Bounds that the option checks (lib/options) share with the queue live in
// lib/options/queue-limits.ts, below both.
export {
  MAX_ATTEMPTS,
  MAX_CONCURRENCY,
  MAX_QUEUE_BATCH,
  MAX_QUEUE_NAME_BYTES,
} from '../options/queue-limits';

/** Lines of a task's log kept (`task.log`): the last ones. */
export const MAX_TASK_LOG_LINES = 100;

/** Characters of one log line kept (longer lines are cut). */
export const MAX_TASK_LOG_LINE = 1_000;

/** Longest `delayMs` accepted: ten years. */
export const MAX_DELAY_MS = 315_360_000_000;

/** Cap of a worker's retry backoff (before jitter): one hour. */
export const MAX_BACKOFF_MS = 3_600_000;

/** Longest an idle worker blocks before it looks at the queue again on its own, in ms. */
export const MAX_IDLE_MS = 5_000;

/** Metadata key under which `@QueueWorker` stores its registrations on a method. */
export const QUEUE_WORKER_METADATA = 'nestjs-redis-lock:queue-worker';

/** Priorities go from -MAX_PRIORITY (soonest) to MAX_PRIORITY (the Lua scripts rely on it). */
export const MAX_PRIORITY = 1_000;

/** Most nodes (tasks) one `enqueueFlow` takes, children at every level included. */
export const MAX_FLOW_NODES = 1_000;

/**
 * A task of a name that no handler on the instance that claimed it runs, but a live worker
 * elsewhere does, is given back due this many ms later (docs/queue.md, named handlers).
 */
export const PASS_ON_DELAY_MS = 1_000;

/**
 * A worker that gave a task back for that reason waits this much longer than the others before it
 * claims on its own again (an idle worker's wake-up at the next due time), for PASS_ON_DELAY_MS
 * plus this after the give-back: when the task is due, the workers that run its name claim first
 * when they are free, instead of racing the one that gave it back.
 */
export const PASS_ON_GRACE_MS = 100;
