import { QueueRateLimitError } from '../../errors/queue-rate-limit.error';
import { UnrecoverableTaskError } from '../../errors/unrecoverable-task.error';
import type { ResolvedWorkerOptions } from '../../options/resolve-options';
import type { BackoffOptions, LeasedTask } from '../interfaces/task.interface';
import type { SettleStep } from '../queue-store';
import { encodeTaskError } from '../task-errors';
import { MAX_BACKOFF_MS } from '../queue.constants';

/** Longest delay a backoff function may ask for: a day. */
const MAX_FUNCTION_DELAY_MS = 86_400_000;

/**
 * Delay before a failed task is tried again: `backoffMs * 2^(attempt - 1)`, capped at
 * `MAX_BACKOFF_MS` (one hour), then jittered to between 50 % and 100 % of that, so that tasks
 * that failed together do not come back together.
 * @param attempt the attempt that failed (1 for the first)
 * @param random a number in [0, 1)
 * @example retryDelayMs(1000, 3) // between 2000 and 4000
 */
export function retryDelayMs(backoffMs: number, attempt: number, random = Math.random()): number {
  return backoffDelayMs(
    { type: 'exponential', delayMs: backoffMs, maxDelayMs: MAX_BACKOFF_MS, jitter: true },
    attempt,
    random,
  );
}

/**
 * How many times an exponential backoff has doubled after `attempt` failed: `attempt - 1`, at
 * most 52 (a delay of 1 ms doubled 52 times is past any cap). Uncapped, 2^1024 is `Infinity`, and
 * a `delayMs` of 0 times it `NaN`: from attempt 1025 on, every retry's nack failed in Redis.
 */
function doublings(attempt: number): number {
  return Math.min(52, Math.max(0, attempt - 1));
}

/**
 * The delay of a `{ type, delayMs, maxDelayMs?, jitter? }` backoff after `attempt` failed; an
 * exponential one without `maxDelayMs` stops at one hour, or at `delayMs` when that is longer.
 */
export function backoffDelayMs(b: BackoffOptions, attempt: number, random = Math.random()): number {
  // The default cap is never below `delayMs` (up to a day): a cap of one hour made the first retry
  // of a 2-hour exponential backoff come after one hour, before a fixed one of the same delayMs.
  const cap = b.maxDelayMs ?? Math.max(MAX_BACKOFF_MS, b.delayMs);
  const base = b.type === 'fixed' ? b.delayMs : Math.min(cap, b.delayMs * 2 ** doublings(attempt));
  return Math.round(b.jitter ? base / 2 + (base / 2) * random : base);
}

/**
 * What a failed attempt becomes (the failure policy, docs/queue.md "Failures"):
 * `QueueRateLimitError` → back unspent, the queue rate-limited; `UnrecoverableTaskError` → dead
 * at once; else a retry after the task's own `backoff`, else the
 * worker's `backoff` (options or function), else the worker's exponential `backoffMs` — or dead,
 * decided by claim.lua, once the task's `maxAttempts` (its own, else the worker's) are used.
 * A backoff function that throws or returns no finite number falls back to `backoffMs`.
 */
export function settleFailure(
  task: LeasedTask,
  error: unknown,
  options: ResolvedWorkerOptions,
): SettleStep {
  // Not a failure: back to the queue unspent, and the queue paused for `ms` (claim.lua).
  if (error instanceof QueueRateLimitError)
    return { kind: 'release', task, data: String(error.ms) };
  const data = encodeTaskError(error);
  if (error instanceof UnrecoverableTaskError) return { kind: 'fail', task, data };
  return { kind: 'nack', task, data, delayMs: failureDelayMs(task, error, options) };
}

function failureDelayMs(task: LeasedTask, error: unknown, options: ResolvedWorkerOptions): number {
  const own = task.options?.backoff;
  if (own) return backoffDelayMs(own, task.attempt);
  const b = options.backoff;
  if (typeof b === 'function') {
    let ms: number;
    try {
      ms = b(task.attempt, error, task);
    } catch {
      ms = NaN;
    }
    if (Number.isFinite(ms)) return Math.min(MAX_FUNCTION_DELAY_MS, Math.max(0, Math.round(ms)));
  } else if (b) {
    return backoffDelayMs(b, task.attempt);
  }
  return retryDelayMs(options.backoffMs, task.attempt);
}
