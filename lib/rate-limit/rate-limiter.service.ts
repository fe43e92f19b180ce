import { randomBytes } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
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
import { CONSUME_SCRIPT, REFUND_SCRIPT } from './rate-limit-scripts';
import { setImmediateUnfaked } from '../redis/unfaked-ticks';

/** One consume's part of a script call: its key and its 5 arguments (consume.lua). */
interface Check {
  key: string;
  args: [algorithm: 's' | 't', limit: number, windowMs: number, cost: number, id: string];
}

/**
 * Checks per script call at most, and units they may add to logs (keeps each run short). 8, not
 * more: the calls of one tick go out together, and with several of them Redis runs one while this
 * process reads the replies of the others and its callers' next consumes form the next calls.
 * Measured (bench/rate-limit.ts, 64 loops, 5 rounds): token bucket 1.21x rate-limiter-flexible's
 * consumes/s at 64 per call, 1.83x at 16, 1.71-2.05x at 8, 1.38x at 4 (more calls, each with
 * its own overhead).
 */
const MAX_CHECKS = 8;
const MAX_UNITS = 1_000;
/** A refusal is answered locally for at most this long (a key reset by hand counts again after it). */
const DENY_CACHE_MS = 1_000;
/** Refusals remembered at most (the oldest go first). */
const MAX_DENIED = 10_000;

/** A refusal of cost 1 answered by Redis: until when this instance refuses the same call itself. */
interface Denied {
  /** The call's limit and window: a call with others asks Redis. */
  limit: number;
  windowMs: number;
  /** `performance.now()` until which this instance answers it (no unit is free before). */
  until: number;
  /** `performance.now()` when a unit may be free (`retryAfterMs` from the refusal). */
  retryAt: number;
  /** `performance.now()` when the key's count empties (`resetMs` from the refusal). */
  resetAt: number;
}

/**
 * Distributed rate limits: at most one Lua script call per `consume` (the consumes this process
 * makes in the same tick share one), Redis time only, so every instance of the app counts against
 * the same limit. Provided by `RedisLockModule` (and `createRedisLock`).
 * @example
 * const { allowed, retryAfterMs } = await rateLimiter.consume(`buy:${userId}`, { limit: 5, windowMs: 10_000 });
 */
@Injectable()
export class RateLimiterService {
  /**
   * This process's part of the ids of its checks: a sliding window's members, and what either
   * algorithm recognises a check sent twice by.
   */
  private readonly idPrefix = randomBytes(6).toString('base64url');
  private calls = 0;
  private readonly batcher = new TickBatcher<Check, RateLimitResult>(
    (checks) => this.send(checks),
    MAX_CHECKS,
    MAX_UNITS,
  );

  /** The last refusal of cost 1 by Redis key (see `consume`). */
  private readonly denied = new Map<string, Denied>();

  constructor(private readonly connection: RedisLockConnection) {}

  /**
   * Counts `cost` units against `key` if they fit, and says how things stand. With
   * `'sliding-window'` (the default) no window of `windowMs` ever admits more than `limit` units,
   * across every instance; with `'token-bucket'` a burst of up to `limit` passes, then `limit`
   * per `windowMs`. A refused call counts nothing. Limits are not stored: a call with another
   * `limit` or `windowMs` applies it at once, to what was already counted (nothing is reset).
   * The key's state expires once it no longer counts. Consumes made in the same tick go to Redis
   * in one script call (per Cluster slot), each counted exactly as if alone, in call order. After
   * a refusal of cost 1, the same call (key, limit, window) is refused by this instance without
   * Redis until the unit it waits for is free, at most 1 s (a flood on one key then costs Redis
   * one call per second per instance). Only time frees that unit, unless a call with another
   * limit or window is admitted on the key (a faster refill, a shorter window's trim): made by
   * this instance, it ends the refusal; made by another, it is not seen within that second.
   * @param key the rate limit's name (a non-empty string of at most 512 bytes; `{tag}` rules as
   *   for lock keys)
   * @throws LockKeyError for an invalid key
   * @throws RedisLockOptionsError for an invalid option, naming it
   * @throws RedisUnavailableError when Redis does not answer within `commandTimeoutMs` (what the
   *   call counted is given back if its reply comes later), or at once while the connection is
   *   down (reconnecting: the call is not sent, so it counts nothing)
   * @example
   * const r = await rateLimiter.consume(`api:${clientId}`, { limit: 100, windowMs: 60_000 });
   * if (!r.allowed) throw new TooManyRequestsException(`retry in ${r.retryAfterMs} ms`);
   */
  async consume(key: string, options: RateLimitOptions): Promise<RateLimitResult> {
    const o = resolveRateLimitOptions(options);
    const redisKey = rateLimitRedisKey(this.connection.options.keyPrefix, o.algorithm, key);
    if (o.cost === 1 && this.denied.size !== 0) {
      const refused = this.refusedLocally(redisKey, o.limit, o.windowMs);
      // Answered after the event loop's turn, as a Redis reply would be: a caller that loops
      // until admitted does not hold the process.
      if (refused) return new Promise((resolve) => setImmediateUnfaked(resolve, refused));
    }
    const sliding = o.algorithm === 'sliding-window';
    // Unique to the call: the script answers a second run of it as the first (ioredis may send a
    // call again after a failover).
    const id = `${this.idPrefix}${(this.calls++).toString(36)}`;
    // Keys of one script call must share a slot on Cluster: batches by hash tag there.
    const group = this.connection.isCluster ? (hashTagOf(redisKey) ?? redisKey) : '';
    const sentAt = performance.now();
    const result = await this.batcher.add(
      group,
      { key: redisKey, args: [sliding ? 's' : 't', o.limit, o.windowMs, o.cost, id] },
      sliding ? o.cost : 1,
    );
    if (result.allowed) {
      // Admitted, so it may have freed units for a refusal remembered with another limit or
      // window: a token bucket refilled at this call's rate, a log trimmed by its window.
      if (this.denied.size !== 0) this.denied.delete(redisKey);
    } else if (o.cost === 1) {
      this.remember(redisKey, o.limit, o.windowMs, sentAt, result);
    }
    return result;
  }

  /** The refusal Redis would give now, when a remembered one still holds. */
  private refusedLocally(
    redisKey: string,
    limit: number,
    windowMs: number,
  ): RateLimitResult | undefined {
    const denied = this.denied.get(redisKey);
    if (!denied || denied.limit !== limit || denied.windowMs !== windowMs) return undefined;
    const now = performance.now();
    if (now >= denied.until) {
      this.denied.delete(redisKey);
      return undefined;
    }
    const retryAfterMs = Math.max(1, Math.ceil(denied.retryAt - now));
    return {
      allowed: false,
      remaining: 0,
      retryAfterMs,
      resetMs: Math.max(retryAfterMs, Math.ceil(denied.resetAt - now)),
    };
  }

  /**
   * Remembers a refusal of cost 1. Redis answered at its time T >= `sentAt` that no unit is free
   * before T + retryAfterMs (rounded up to whole ms): so none is before sentAt + retryAfterMs - 1.
   */
  private remember(
    redisKey: string,
    limit: number,
    windowMs: number,
    sentAt: number,
    result: RateLimitResult,
  ): void {
    const retryAt = sentAt + result.retryAfterMs;
    const until = Math.min(retryAt - 1, performance.now() + DENY_CACHE_MS);
    if (until <= performance.now()) return;
    if (this.denied.size >= MAX_DENIED && !this.denied.has(redisKey)) {
      this.denied.delete(this.denied.keys().next().value as string);
    }
    this.denied.set(redisKey, {
      limit,
      windowMs,
      until,
      retryAt,
      resetAt: sentAt + result.resetMs,
    });
  }

  private async send(checks: Check[]): Promise<(RateLimitResult | Error)[]> {
    // Reconnecting: the call would wait in the client's offline queue, reject after
    // commandTimeoutMs, and still run (and count) once Redis is back. Refused unsent instead.
    if (this.connection.disconnected) {
      throw new RedisUnavailableError(CONSUME_SCRIPT.name, 'not connected (not sent, not counted)');
    }
    const reply = (await this.connection.run(
      CONSUME_SCRIPT,
      checks.map((c) => c.key),
      checks.flatMap((c) => c.args),
      // Too late: the callers were told RedisUnavailableError (a 503), so nothing may count.
      (late) => this.giveBack(checks, late as (number | string)[]),
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

  /**
   * Gives back what a consume call counted when its reply came after `commandTimeoutMs` (Redis ran
   * it once a stall ended, or ioredis sent it again after a reconnect): else the key stayed locked
   * out for a window by calls nobody was admitted by. Not awaited, bounded as every call; if it
   * fails, those units stay counted.
   */
  private giveBack(checks: Check[], reply: (number | string)[]): void {
    const keys: string[] = [];
    const args: (string | number)[] = [`${this.idPrefix}${(this.calls++).toString(36)}`];
    checks.forEach((check, i) => {
      if (reply[4 * i] !== 1) return;
      keys.push(check.key);
      args.push(...check.args);
      // Units freed: a refusal remembered for the key may no longer be Redis's answer.
      this.denied.delete(check.key);
    });
    if (keys.length === 0) return;
    // A refusal answered meanwhile (a call sent before this give-back, which the late call's count
    // refused) is remembered after the lines above: once the give-back ran, it is not Redis's answer.
    this.connection.run(REFUND_SCRIPT, keys, args).then(
      () => keys.forEach((key) => this.denied.delete(key)),
      () => undefined,
    );
  }
}
