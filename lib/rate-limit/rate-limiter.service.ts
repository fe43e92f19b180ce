import { randomBytes } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { RedisLockConnection } from '../redis/redis-connection';
import { rateLimitRedisKey } from './rate-limit-keys';
import {
  resolveRateLimitOptions,
  type RateLimitOptions,
  type RateLimitResult,
} from './rate-limit-options';
import { RATE_LIMIT_SCRIPTS } from './rate-limit-scripts';

/**
 * Distributed rate limits: one Lua script call per `consume`, Redis time only, so every instance
 * of the app counts against the same limit. Provided by `RedisLockModule` (and `createRedisLock`).
 * @example
 * const { allowed, retryAfterMs } = await rateLimiter.consume(`buy:${userId}`, { limit: 5, windowMs: 10_000 });
 */
@Injectable()
export class RateLimiterService {
  /** This process's part of the ids that keep the members of a sliding window distinct. */
  private readonly idPrefix = randomBytes(6).toString('base64url');
  private calls = 0;

  constructor(private readonly connection: RedisLockConnection) {}

  /**
   * Counts `cost` units against `key` if they fit, and says how things stand. With
   * `'sliding-window'` (the default) no window of `windowMs` ever admits more than `limit` units,
   * across every instance; with `'token-bucket'` a burst of up to `limit` passes, then `limit`
   * per `windowMs`. A refused call counts nothing. Limits are not stored: a call with another
   * `limit` or `windowMs` applies it at once, to what was already counted (nothing is reset).
   * The key's state expires once it no longer counts.
   * @param key the rate limit's name (a non-empty string of at most 512 bytes; `{tag}` rules as
   *   for lock keys)
   * @throws LockKeyError for an invalid key
   * @throws RedisLockOptionsError for an invalid option, naming it
   * @throws RedisUnavailableError when Redis does not answer within `commandTimeoutMs`
   * @example
   * const r = await rateLimiter.consume(`api:${clientId}`, { limit: 100, windowMs: 60_000 });
   * if (!r.allowed) throw new TooManyRequestsException(`retry in ${r.retryAfterMs} ms`);
   */
  async consume(key: string, options: RateLimitOptions): Promise<RateLimitResult> {
    const o = resolveRateLimitOptions(options);
    const redisKey = rateLimitRedisKey(this.connection.options.keyPrefix, o.algorithm, key);
    const args: (string | number)[] = [o.limit, o.windowMs, o.cost];
    if (o.algorithm === 'sliding-window')
      args.push(`${this.idPrefix}${(this.calls++).toString(36)}`);
    const [allowed, remaining, retryAfterMs, resetMs] = (await this.connection.run(
      RATE_LIMIT_SCRIPTS[o.algorithm],
      [redisKey],
      args,
    )) as number[];
    return { allowed: allowed === 1, remaining, retryAfterMs, resetMs };
  }
}
