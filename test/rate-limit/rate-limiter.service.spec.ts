import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  LockKeyError,
  RateLimiterService,
  RedisCommandError,
  RedisLockOptionsError,
  type RateLimitOptions,
} from '../../lib';
import { CONSUME_SCRIPT, REFUND_SCRIPT } from '../../lib/rate-limit/rate-limit-scripts';
import {
  commandCalls,
  createLockApp,
  redisClient,
  redisTimeMs,
  scriptCalls,
  uniquePrefix,
  waitFor,
  scriptsIn,
} from '../support/helpers';
import { startRedisServer } from '../support/redis-server';
import { busiestWindow, readWindowLog } from '../support/window-log';

describe('RateLimiterService.consume', () => {
  const prefix = uniquePrefix('rate');
  let apps: INestApplicationContext[];
  let limiters: RateLimiterService[];
  let redis: Redis;

  beforeAll(async () => {
    // Four instances of the app on one Redis.
    apps = await Promise.all([0, 1, 2, 3].map(() => createLockApp({ keyPrefix: prefix })));
    limiters = apps.map((app) => app.get(RateLimiterService));
    redis = redisClient();
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    redis.disconnect();
  });

  const limiter = () => limiters[0];

  it('sliding window: admits `limit` units, then refuses with the wait until one fits, counting nothing', async () => {
    const o: RateLimitOptions = { limit: 5, windowMs: 60_000 };
    const results = [];
    for (let i = 0; i < 7; i++) results.push(await limiter().consume('login:ann', o));
    expect(results.map((r) => r.allowed)).toEqual([true, true, true, true, true, false, false]);
    expect(results.map((r) => r.remaining)).toEqual([4, 3, 2, 1, 0, 0, 0]);
    expect(results[4]).toMatchObject({ retryAfterMs: 0, resetMs: 60_000 });
    for (const refused of results.slice(5)) {
      expect(refused.retryAfterMs).toBeGreaterThan(55_000);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(60_000);
    }
    // The log holds the five admitted units only, and expires with the window.
    const key = `${prefix}rate:{login:ann}`;
    expect(await redis.zcard(key)).toBe(5);
    expect(await redis.pttl(key)).toBeGreaterThan(55_000);
  });

  it('sliding window: a cost takes that many units, and one over what is left is refused whole', async () => {
    const o = { limit: 10, windowMs: 60_000 };
    expect(await limiter().consume('export:1', { ...o, cost: 7 })).toMatchObject({
      allowed: true,
      remaining: 3,
    });
    expect(await limiter().consume('export:1', { ...o, cost: 4 })).toMatchObject({
      allowed: false,
      remaining: 3,
    });
    expect(await limiter().consume('export:1', { ...o, cost: 3 })).toMatchObject({
      allowed: true,
      remaining: 0,
    });
  });

  it('sliding window: takes a cost of any size up to `limit` (100,000), one entry per unit', async () => {
    const o = { limit: 100_000, windowMs: 60_000 };
    // Costs of 4,000 and more once failed in Redis (ZADD given all the entries through unpack).
    expect(await limiter().consume('bulk:1', { ...o, cost: 5_000 })).toMatchObject({
      allowed: true,
      remaining: 95_000,
    });
    expect(await limiter().consume('bulk:1', { ...o, cost: 95_000 })).toMatchObject({
      allowed: true,
      remaining: 0,
    });
    expect(await redis.zcard(`${prefix}rate:{bulk:1}`)).toBe(100_000);
    expect(await limiter().consume('bulk:1', { ...o, cost: 1 })).toMatchObject({
      allowed: false,
      remaining: 0,
    });
    expect(await redis.zcard(`${prefix}rate:{bulk:1}`)).toBe(100_000);
    await redis.del(`${prefix}rate:{bulk:1}`);
  });

  it('sliding window: a call of a large cost run twice (same id) is counted once', async () => {
    const key = `${prefix}rate:{bulk:again}`;
    // consume.lua's arguments: algorithm, limit, windowMs, cost, call id.
    const run = (limit: number) =>
      CONSUME_SCRIPT.run(redis, [key], ['s', limit, 60_000, 4_500, 'again1']);
    expect(await run(10_000)).toEqual([1, 5_500, 0, 60_000]);
    expect(await run(10_000)).toEqual([1, 5_500, 0, 60_000]);
    expect(await redis.zcard(key)).toBe(4_500);
    // Run again under a limit lowered below what it counted: admitted, nothing left.
    expect(await run(4_000)).toEqual([1, 0, 0, 60_000]);
    expect(await redis.zcard(key)).toBe(4_500);
  });

  it('token bucket: a burst of `limit`, then refusals saying when a token is back; one string per key', async () => {
    const o: RateLimitOptions = { limit: 7, windowMs: 7_000, algorithm: 'token-bucket' };
    // One tick, 8 consumes: one script call (at most 8 checks each), one Redis time, so nothing
    // refills between them (a serial burst on a loaded machine saw a token come back before the
    // last).
    const results = await Promise.all(
      Array.from({ length: 8 }, () => limiter().consume('api:c1', o)),
    );
    expect(results.map((r) => r.allowed)).toEqual([...Array<boolean>(7).fill(true), false]);
    expect(results.map((r) => r.remaining)).toEqual([6, 5, 4, 3, 2, 1, 0, 0]);
    // One token refills per 1,000 ms.
    expect(results[7].retryAfterMs).toBe(1_000);
    const key = `${prefix}bucket:{api:c1}`;
    // One string: the tokens left and when they were counted (Redis time, ms).
    const [left, at] = (await redis.get(key))!.split(' ').map(Number);
    expect(left).toBe(0);
    expect(Math.abs(at - (await redisTimeMs(redis)))).toBeLessThan(60_000);
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(6_000); // until full again
    expect(ttl).toBeLessThanOrEqual(7_000);
  });

  it('token bucket: a bucket stored without a call id (by an older version) is read as before', async () => {
    const o: RateLimitOptions = { limit: 7, windowMs: 7_000, algorithm: 'token-bucket' };
    const key = `${prefix}bucket:{api:old}`;
    await redis.set(key, `3 ${await redisTimeMs(redis)}`, 'PX', 7_000);
    expect(await limiter().consume('api:old', o)).toMatchObject({ allowed: true, remaining: 2 });
    // Written back with this call's id as a third field.
    expect((await redis.get(key))!.split(' ')).toHaveLength(3);
  });

  it('token bucket: a script call of several checks of one key, run twice, takes each admitted one once', async () => {
    const key = `${prefix}bucket:{api:twice}`;
    // consume.lua's arguments per check: algorithm, limit, windowMs, cost, call id. A bucket of
    // 10 (refilling 10 an hour), 4 checks of it in one call (the consumes of one tick).
    const check = (cost: number, id: string) => ['t', 10, 3_600_000, cost, id];
    const run = async () => {
      const reply = (await CONSUME_SCRIPT.run(
        redis,
        [key, key, key, key],
        [...check(3, 'tw1'), ...check(9, 'tw2'), ...check(1, 'tw3'), ...check(1, 'tw4')],
      )) as number[];
      return [0, 1, 2, 3].map((i) => reply[4 * i]);
    };
    const tokens = async () => Math.floor(Number((await redis.get(key))!.split(' ')[0]));
    expect(await run()).toEqual([1, 0, 1, 1]);
    expect(await tokens()).toBe(5);
    // Run again (ioredis sent it twice): the admitted checks take nothing, the refused one is
    // counted as if alone (still refused).
    expect(await run()).toEqual([1, 0, 1, 1]);
    expect(await tokens()).toBe(5);
    // Refilled meanwhile (by hand): the check refused the first time takes its 9, once.
    const [, at, last] = (await redis.get(key))!.split(' ');
    await redis.set(key, `9 ${at} ${last}`, 'PX', 3_600_000);
    expect(await run()).toEqual([1, 1, 1, 1]);
    expect(await run()).toEqual([1, 1, 1, 1]);
    expect(await tokens()).toBe(0);
  });

  it('gives back what a late call counted once, even when the give-back runs twice', async () => {
    const bucket = `${prefix}bucket:{api:late}`;
    const log = `${prefix}rate:{api:late}`;
    const tokens = async () => Math.floor(Number((await redis.get(bucket))!.split(' ')[0]));
    await CONSUME_SCRIPT.run(redis, [bucket], ['t', 10, 3_600_000, 5, 'lt1']);
    // The late call: 4 checks, all admitted (4 tokens, 4 entries).
    const late = ['t', 10, 3_600_000, 3, 'lt2', 's', 10, 60_000, 1, 'lt3'];
    late.push('s', 10, 60_000, 3, 'lt4', 't', 10, 3_600_000, 1, 'lt5');
    const keys = [bucket, log, log, bucket];
    await CONSUME_SCRIPT.run(redis, keys, late);
    expect(await tokens()).toBe(1);
    expect(await redis.zcard(log)).toBe(4);
    // refund.lua: a mark unique to the call, then the late call's checks as sent.
    expect(await REFUND_SCRIPT.run(redis, keys, ['lt6', ...late])).toBe(4);
    expect(await tokens()).toBe(5);
    expect(await redis.zcard(log)).toBe(0);
    // Sent twice by ioredis: nothing more given back.
    expect(await REFUND_SCRIPT.run(redis, keys, ['lt6', ...late])).toBe(0);
    expect(await tokens()).toBe(5);
  });

  it('a call admitted on the key with another limit or window ends a refusal remembered for it', async () => {
    // Token bucket: a call refilling 100,000 tokens per ms writes back what it refilled.
    const slow: RateLimitOptions = { limit: 1, windowMs: 60_000, algorithm: 'token-bucket' };
    const fast: RateLimitOptions = { limit: 100_000, windowMs: 1, algorithm: 'token-bucket' };
    expect((await limiter().consume('raised', slow)).allowed).toBe(true);
    expect((await limiter().consume('raised', slow)).allowed).toBe(false);
    await waitFor(
      'the faster call admitted',
      async () => (await limiter().consume('raised', fast)).allowed,
    );
    // Redis admits the slow call now: this instance asks it instead of answering the refusal.
    expect(await limiter().consume('raised', slow)).toMatchObject({ allowed: true, remaining: 0 });
    // Sliding window: a call with a 1 ms window trims the entries older than that.
    const long = { limit: 2, windowMs: 60_000 };
    await limiter().consume('trimmed', long);
    await limiter().consume('trimmed', long);
    expect((await limiter().consume('trimmed', long)).allowed).toBe(false);
    // Older than the short window: its call trims them (one within its 1 ms would still count).
    await new Promise((r) => setTimeout(r, 5));
    await waitFor(
      'the short window admitted',
      async () => (await limiter().consume('trimmed', { limit: 2, windowMs: 1 })).allowed,
    );
    expect((await limiter().consume('trimmed', long)).allowed).toBe(true);
  });

  it('takes a changed limit at once, on every instance, without resetting what was counted', async () => {
    const windowMs = 60_000;
    for (let i = 0; i < 5; i++) await limiters[i % 4].consume('plan:acme', { limit: 10, windowMs });
    // Lowered to 6: one more fits.
    expect(await limiters[1].consume('plan:acme', { limit: 6, windowMs })).toMatchObject({
      allowed: true,
      remaining: 0,
    });
    expect((await limiters[2].consume('plan:acme', { limit: 6, windowMs })).allowed).toBe(false);
    // Raised to 20: 6 are counted.
    expect(await limiters[3].consume('plan:acme', { limit: 20, windowMs })).toMatchObject({
      allowed: true,
      remaining: 13,
    });
    // The token bucket alike: a lowered limit caps the tokens, nothing is refilled.
    const bucket: RateLimitOptions = { limit: 10, windowMs, algorithm: 'token-bucket' };
    for (let i = 0; i < 8; i++) await limiters[i % 4].consume('plan:b', bucket);
    expect(await limiters[0].consume('plan:b', { ...bucket, limit: 3 })).toMatchObject({
      allowed: true,
      remaining: 1,
    });
  });

  it('never answers a negative `remaining` when a lowered limit is under what was counted', async () => {
    const windowMs = 60_000;
    for (let i = 0; i < 10; i++) await limiter().consume('plan:low', { limit: 10, windowMs });
    expect(await limiter().consume('plan:low', { limit: 5, windowMs })).toMatchObject({
      allowed: false,
      remaining: 0,
    });
    for (let i = 0; i < 3; i++)
      await limiter().consume('plan:lowc', { limit: 10, windowMs, cost: 3 });
    expect(await limiter().consume('plan:lowc', { limit: 5, windowMs, cost: 2 })).toMatchObject({
      allowed: false,
      remaining: 0,
    });
    expect(await redis.zcard(`${prefix}rate:{plan:lowc}`)).toBe(9);
  });

  it('token bucket: never answers a negative `remaining` when the Redis clock went back', async () => {
    // Counted at a Redis time 5 s ahead (as a promoted replica with a slower clock would find):
    // the bucket reads as 5 tokens below empty.
    const key = `${prefix}bucket:{api:back}`;
    const at = (await redisTimeMs(redis)) + 5_000;
    await redis.set(key, `0 ${at} back1`, 'PX', 10_000);
    const bucket: RateLimitOptions = { limit: 10, windowMs: 10_000, algorithm: 'token-bucket' };
    expect(await limiter().consume('api:back', bucket)).toMatchObject({
      allowed: false,
      remaining: 0,
    });
    // The call that took the tokens, run again: admitted, nothing left.
    const again = (await CONSUME_SCRIPT.run(
      redis,
      [key],
      ['t', 10, 10_000, 1, 'back1'],
    )) as number[];
    expect(again.slice(0, 3)).toEqual([1, 0, 0]);
    expect((await redis.get(key))!.split(' ')).toEqual(['0', String(at), 'back1']);
  });

  it('never admits more than `limit` in any window across 4 instances x 8 concurrent callers', async () => {
    const o = { limit: 20, windowMs: 1_000 };
    const key = 'crowd';
    const reading = readWindowLog(redis, `${prefix}rate:{${key}}`, o.windowMs);
    let admitted = 0;
    let refused = 0;
    const deadline = Date.now() + 3_000;
    await Promise.all(
      Array.from({ length: 32 }, async (_, caller) => {
        while (Date.now() < deadline) {
          const r = await limiters[caller % 4].consume(key, o);
          if (r.allowed) admitted++;
          else refused++;
        }
      }),
    );
    const times = await reading.stop();
    expect(times).toHaveLength(admitted);
    // The crowd did reach the limit, and slid past it: more than two windows' worth admitted.
    expect(busiestWindow(times, o.windowMs)).toBe(o.limit);
    expect(admitted).toBeGreaterThan(2 * o.limit);
    expect(refused).toBeGreaterThan(0);
  });

  it('costs one script call per serial consume, and nothing else (dedicated redis-server)', async () => {
    // Other test files share the suite's server: its commandstats would count their calls too.
    const server = await startRedisServer();
    const app = await createLockApp({ redis: server.url, keyPrefix: prefix });
    const own = new Redis(server.url);
    const isolated = app.get(RateLimiterService);
    try {
      await isolated.consume('warm-up', { limit: 1, windowMs: 1 });
      await isolated.consume('warm-up', { limit: 1, windowMs: 1, algorithm: 'token-bucket' });
      await own.config('RESETSTAT');
      // Limits every call fits in: a refusal may be answered without Redis (tested below).
      for (let i = 0; i < 20; i++)
        await isolated.consume('cost:sw', { limit: 100, windowMs: 1_000 });
      for (let i = 0; i < 20; i++) {
        await isolated.consume('cost:tb', {
          limit: 100,
          windowMs: 1_000,
          algorithm: 'token-bucket',
        });
      }
      expectOneScriptCallEach(await commandCalls(own));
    } finally {
      own.disconnect();
      await app.close();
      await server.stop();
    }
  });

  it('sends the consumes of one tick in script calls of at most 8 checks, each counted exactly as if alone, in call order (dedicated redis-server)', async () => {
    const server = await startRedisServer();
    const app = await createLockApp({ redis: server.url, keyPrefix: prefix });
    const own = new Redis(server.url);
    const isolated = app.get(RateLimiterService);
    try {
      await isolated.consume('warm-up', { limit: 1, windowMs: 1 });
      await own.config('RESETSTAT');
      const o = { limit: 10, windowMs: 60_000 };
      const bucket: RateLimitOptions = { ...o, algorithm: 'token-bucket' };
      const results = await Promise.all([
        ...Array.from({ length: 30 }, () => isolated.consume('tick:a', o)),
        isolated.consume('tick:b', { ...o, cost: 4 }),
        ...Array.from({ length: 12 }, () => isolated.consume('tick:a', bucket)),
      ]);
      // 43 consumes: 6 calls of at most 8 checks (not one per consume).
      expect(await scriptCalls(own)).toBe(6);
      const sliding = results.slice(0, 30);
      expect(sliding.map((r) => r.allowed)).toEqual([
        ...Array<boolean>(10).fill(true),
        ...Array<boolean>(20).fill(false),
      ]);
      expect(sliding.slice(0, 10).map((r) => r.remaining)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
      expect(results[30]).toMatchObject({ allowed: true, remaining: 6 });
      expect(results.slice(31).filter((r) => r.allowed)).toHaveLength(10);
      expect(await own.zcard(`${prefix}rate:{tick:a}`)).toBe(10);
      expect(await own.zcard(`${prefix}rate:{tick:b}`)).toBe(4);

      // 150 at once: at most 8 checks per script call.
      await own.config('RESETSTAT');
      const many = await Promise.all(
        Array.from({ length: 150 }, (_, i) => isolated.consume(`tick:${i % 7}`, o)),
      );
      expect(await scriptCalls(own)).toBe(19);
      expect(many.filter((r) => r.allowed)).toHaveLength(70);
    } finally {
      own.disconnect();
      await app.close();
      await server.stop();
    }
  });

  it('after a refusal of cost 1, refuses the same call locally until a unit can be free, at most 1 s (dedicated redis-server)', async () => {
    const server = await startRedisServer();
    const app = await createLockApp({ redis: server.url, keyPrefix: prefix });
    const own = new Redis(server.url);
    const isolated = app.get(RateLimiterService);
    try {
      const o = { limit: 2, windowMs: 60_000 };
      await isolated.consume('flood', o);
      await isolated.consume('flood', o);
      await own.config('RESETSTAT');
      const first = await isolated.consume('flood', o);
      expect(first).toMatchObject({ allowed: false, remaining: 0 });
      // A flood on the key: answered here, as Redis would, without a script call.
      const flood = [];
      for (let i = 0; i < 50; i++) flood.push(await isolated.consume('flood', o));
      expect(await scriptCalls(own)).toBe(1);
      for (const r of flood) {
        expect(r).toMatchObject({ allowed: false, remaining: 0 });
        expect(r.retryAfterMs).toBeGreaterThan(0);
        expect(r.retryAfterMs).toBeLessThanOrEqual(first.retryAfterMs);
      }
      // Another limit, another cost or another algorithm asks Redis.
      expect(await isolated.consume('flood', { ...o, limit: 3 })).toMatchObject({
        allowed: true,
        remaining: 0,
      });
      expect((await isolated.consume('flood', { ...o, limit: 5, cost: 2 })).allowed).toBe(true);
      expect((await isolated.consume('flood', { ...o, algorithm: 'token-bucket' })).allowed).toBe(
        true,
      );
      expect(await scriptCalls(own)).toBe(4);
      // The key reset by hand: counted again once the local refusal ended (1 s at most, not 60).
      await own.del(`${prefix}rate:{flood}`);
      await waitFor('admitted again', async () => (await isolated.consume('flood', o)).allowed);
    } finally {
      own.disconnect();
      await app.close();
      await server.stop();
    }
  });

  it('a check that fails in a shared script call fails alone', async () => {
    // Not a log: the sliding window's ZSET commands fail on it with WRONGTYPE.
    await redis.set(`${prefix}rate:{not-a-log}`, 'x');
    const o = { limit: 5, windowMs: 60_000 };
    const [bad, good] = await Promise.allSettled([
      limiter().consume('not-a-log', o),
      limiter().consume('fine', o),
    ]);
    expect(bad.status).toBe('rejected');
    const err = (bad as PromiseRejectedResult).reason as Error;
    expect(err).toBeInstanceOf(RedisCommandError);
    expect(err.message).toMatch(/WRONGTYPE/);
    expect(good).toMatchObject({ status: 'fulfilled', value: { allowed: true, remaining: 4 } });
  });

  /** 40 consumes: 40 script calls, and no command but the scripts' own (and the probe's). */
  function expectOneScriptCallEach(delta: Map<string, number>): void {
    expect(scriptsIn(delta)).toBe(40);
    const others = [...delta].filter(
      ([c, n]) =>
        n > 0 &&
        ![
          'evalsha',
          'eval',
          'info',
          'config|resetstat',
          'time',
          'zcount',
          'zremrangebyscore',
          'zcard',
          'zadd',
          'pexpire',
          'zrange',
          'get',
          'set',
        ].includes(c),
    );
    expect(others).toEqual([]);
  }

  it('refuses bad options and keys with typed errors naming them', async () => {
    const bad: Array<[unknown, string]> = [
      [{ limit: 0, windowMs: 1_000 }, 'limit'],
      [{ limit: 100_001, windowMs: 1_000 }, 'limit'],
      [{ limit: 1.5, windowMs: 1_000 }, 'limit'],
      [{ limit: 5, windowMs: 0 }, 'windowMs'],
      [{ limit: 5, windowMs: 86_400_001 }, 'windowMs'],
      [{ limit: 5, windowMs: 1_000, cost: 6 }, 'cost'],
      [{ limit: 5, windowMs: 1_000, algorithm: 'fixed' }, 'algorithm'],
      [{ limit: 5, windowMs: 1_000, burst: 2 }, 'burst'],
    ];
    for (const [options, option] of bad) {
      const err = await limiter()
        .consume('k', options as RateLimitOptions)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect((err as Error).message).toContain(option);
    }
    await expect(limiter().consume('', { limit: 1, windowMs: 1 })).rejects.toThrow(LockKeyError);
    await expect(limiter().consume('x'.repeat(600), { limit: 1, windowMs: 1 })).rejects.toThrow(
      LockKeyError,
    );
  });
});
