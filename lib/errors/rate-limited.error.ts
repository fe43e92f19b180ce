import { RedisLockError } from './redis-lock.error';

/**
 * A call over its rate limit (`@RateLimit`). With `LockInterceptor`, `429 Too Many Requests` with
 * `Retry-After` (whole seconds, rounded up).
 */
export class RateLimitedError extends RedisLockError {
  /**
   * @param key the rate limit's key (the template filled in)
   * @param limit units per window
   * @param windowMs the window, in ms
   * @param retryAfterMs ms until a call of the same cost would be admitted
   */
  constructor(
    readonly key: string,
    readonly limit: number,
    readonly windowMs: number,
    readonly retryAfterMs: number,
  ) {
    super(`rate limit '${key}' reached (${limit} per ${windowMs} ms); retry in ${retryAfterMs} ms`);
  }
}
