import { MAX_BACKOFF_MS } from './queue.constants';

/**
 * Delay before a failed task is tried again: `backoffMs * 2^(attempt - 1)`, capped at
 * `MAX_BACKOFF_MS` (one hour), then jittered to between 50 % and 100 % of that, so that tasks
 * that failed together do not come back together.
 * @param attempt the attempt that failed (1 for the first)
 * @param random a number in [0, 1)
 * @example retryDelayMs(1000, 3) // between 2000 and 4000
 */
export function retryDelayMs(backoffMs: number, attempt: number, random = Math.random()): number {
  const base = Math.min(MAX_BACKOFF_MS, backoffMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(base / 2 + (base / 2) * random);
}
