import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { checkInt, checkKnownKeys } from '../options/validate';

/** How `RateLimiterService.consume` counts. */
export type RateLimitAlgorithm = 'sliding-window' | 'token-bucket';

/** Options of `RateLimiterService.consume` and `@RateLimit`. */
export interface RateLimitOptions {
  /**
   * Units per window: with `'sliding-window'`, no window of `windowMs` admits more; with
   * `'token-bucket'`, the bucket's size (the largest burst) and what it refills per `windowMs`.
   * An integer from 1 to 100,000 (the sliding window keeps one entry per admitted unit).
   */
  limit: number;
  /** The window, in ms: an integer from 1 to 86,400,000 (one day). */
  windowMs: number;
  /**
   * `'sliding-window'` (exact: a log of the units admitted in the last `windowMs`, memory up to
   * `limit` entries per key) or `'token-bucket'` (a refilling bucket: two numbers per key).
   * @default 'sliding-window'
   */
  algorithm?: RateLimitAlgorithm;
  /**
   * Units this call takes: an integer from 1 to `limit`.
   * @default 1
   */
  cost?: number;
}

/** What `RateLimiterService.consume` answers. */
export interface RateLimitResult {
  /** Whether the call was admitted (its `cost` counted). A refused call counts nothing. */
  allowed: boolean;
  /**
   * Units that could still be taken now (after this call, when admitted); never below 0, even
   * when a lowered limit is under what was counted.
   */
  remaining: number;
  /** Refused: ms until a call of the same cost would be admitted (≥ 1); admitted: 0. */
  retryAfterMs: number;
  /** Ms until nothing is counted against the key any more (the window empty, the bucket full). */
  resetMs: number;
}

/** Largest `limit` (the sliding window keeps an entry per admitted unit). */
export const MAX_RATE_LIMIT = 100_000;
/** Largest `windowMs`: one day. */
export const MAX_RATE_WINDOW_MS = 86_400_000;
const KNOWN = ['limit', 'windowMs', 'algorithm', 'cost'];

/** @internal Checks the options of one call (`RedisLockOptionsError` naming the option). */
export function resolveRateLimitOptions(options: unknown): Required<RateLimitOptions> {
  const o = checkKnownKeys('options', options, KNOWN);
  const limit = checkInt('limit', o.limit, 1, MAX_RATE_LIMIT);
  const windowMs = checkInt('windowMs', o.windowMs, 1, MAX_RATE_WINDOW_MS);
  const algorithm = o.algorithm ?? 'sliding-window';
  if (algorithm !== 'sliding-window' && algorithm !== 'token-bucket') {
    throw new RedisLockOptionsError('algorithm', algorithm, "'sliding-window' or 'token-bucket'");
  }
  const cost = o.cost === undefined ? 1 : checkInt('cost', o.cost, 1, limit);
  return { limit, windowMs, algorithm, cost };
}
