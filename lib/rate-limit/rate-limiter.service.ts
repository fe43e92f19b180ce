import { randomBytes } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { toRedisError } from '../redis/bounded';
import { RedisLockConnection } from '../redis/redis-connection';
import { hashTagOf } from '../redis/tagged-key';
import { TickBatcher } from '../redis/tick-batcher';
import { rateLimitRedisKey } from './rate-limit-keys';
import {
  resolveRateLimitOptions,
  type RateLimitOptions,
  type RateLimitResult,
} from './rate-limit-options';
import { CONSUME_SCRIPT } from './rate-limit-scripts';

/** One consume's part of a script call: its key and its 5 arguments (consume.lua). */
interface Check {
  key: string;
  args: [algorithm: 's' | 't', limit: number, windowMs: number, cost: number, id: string];
}

/** Checks per script call at most, and units they may add to logs (keeps each run short). */
const MAX_CHECKS = 64;
const MAX_UNITS = 1_000;

/**
 * Distributed rate limits: at most one Lua script call per `consume` (the consumes this process
 * makes in the same tick share one), Redis time only, so every instance of the app counts against
 * the same limit. Provided by `RedisLockModule` (and `createRedisLock`).
 * @example
 * const { allowed, retryAfterMs } = await rateLimiter.consume(`buy:${userId}`, { limit: 5, windowMs: 10_000 });
 */
@Injectable()
export class RateLimiterService {
  /** This process's part of the ids that keep the members of a sliding window distinct. */
  private readonly idPrefix = randomBytes(6).toString('base64url');
  private calls = 0;
  private readonly batcher = new TickBatcher<Check, RateLimitResult>(
    (checks) => this.send(checks),
    MAX_CHECKS,
    MAX_UNITS,
  );

  constructor(private readonly connection: RedisLockConnection) {}

  /**
   * Counts `cost` units against `key` if they fit, and says how things stand. With
   * `'sliding-window'` (the default) no window of `windowMs` ever admits more than `limit` units,
   * across every instance; with `'token-bucket'` a burst of up to `limit` passes, then `limit`
   * per `windowMs`. A refused call counts nothing. Limits are not stored: a call with another
   * `limit` or `windowMs` applies it at once, to what was already counted (nothing is reset).
   * The key's state expires once it no longer counts. Consumes made in the same tick go to Redis
   * in one script call (per Cluster slot), each counted exactly as if alone, in call order.
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
    const sliding = o.algorithm === 'sliding-window';
    const id = sliding ? `${this.idPrefix}${(this.calls++).toString(36)}` : '';
    // Keys of one script call must share a slot on Cluster: batches by hash tag there.
    const group = this.connection.isCluster ? (hashTagOf(redisKey) ?? redisKey) : '';
    return this.batcher.add(
      group,
      { key: redisKey, args: [sliding ? 's' : 't', o.limit, o.windowMs, o.cost, id] },
      sliding ? o.cost : 1,
    );
  }

  private async send(checks: Check[]): Promise<(RateLimitResult | Error)[]> {
    const reply = (await this.connection.run(
      CONSUME_SCRIPT,
      checks.map((c) => c.key),
      checks.flatMap((c) => c.args),
    )) as (number | string)[];
    return checks.map((_, i) => {
      const [allowed, remaining, retryAfterMs, resetMs] = reply.slice(4 * i, 4 * i + 4);
      if (allowed === -1) return toRedisError(CONSUME_SCRIPT.name, new Error(String(remaining)));
      return {
        allowed: allowed === 1,
        remaining: remaining as number,
        retryAfterMs: retryAfterMs as number,
        resetMs: resetMs as number,
      };
    });
  }
}
