import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { RateLimiterService, RedisUnavailableError, type RateLimitOptions } from '../../lib';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import { createLockApp, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

describe('RateLimiterService when Redis is down (dedicated redis-server)', () => {
  let server: RedisServer;
  let app: INestApplicationContext;
  let limiter: RateLimiterService;
  const prefix = uniquePrefix('rate-unavailable');

  beforeAll(async () => {
    server = await startRedisServer();
    app = await createLockApp({ redis: server.url, keyPrefix: prefix, commandTimeoutMs: 300 });
    limiter = app.get(RateLimiterService);
  });
  afterAll(async () => {
    await app.close();
    await server.stop();
  });

  /** Consumes another key until one is answered. */
  const consumesWork = (what: string, timeoutMs: number, intervalMs: number) =>
    waitFor(
      what,
      async () =>
        (await limiter.consume('probe', { limit: 1_000, windowMs: 60_000 }).catch(() => null)) !==
        null,
      timeoutMs,
      intervalMs,
    );

  it('gives back what consumes answered RedisUnavailableError counted when Redis runs them late', async () => {
    const login = { limit: 3, windowMs: 60_000 };
    const bucket: RateLimitOptions = { limit: 4, windowMs: 60_000, algorithm: 'token-bucket' };
    const bulk = { limit: 10, windowMs: 60_000, cost: 5 };
    expect(await limiter.consume('warm-up', login)).toMatchObject({ allowed: true });
    const own = new Redis(server.url);
    try {
      // A stall longer than commandTimeoutMs (a slow fork, another client's long script).
      await own.call('CLIENT', 'PAUSE', '700', 'ALL');
      // One script call (one tick) of 6 checks, all admitted once Redis runs it.
      const stalled = await Promise.allSettled([
        ...[0, 1, 2].map(() => limiter.consume('login:carol', login)),
        limiter.consume('api:carol', { ...bucket, cost: 3 }),
        limiter.consume('api:carol', bucket),
        limiter.consume('bulk:carol', bulk),
      ]);
      for (const outcome of stalled) {
        expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(RedisUnavailableError);
      }
      // Answered again: the late reply came before this one on the connection, and what it gives
      // back is sent before the calls below.
      await consumesWork('Redis to answer again', 5_000, 20);
      // Nobody was admitted: carol has her 3 attempts, her full bucket and her 10 units.
      expect(await limiter.consume('login:carol', login)).toMatchObject({
        allowed: true,
        remaining: 2,
      });
      expect(await limiter.consume('api:carol', bucket)).toMatchObject({
        allowed: true,
        remaining: 3,
      });
      expect(await own.zcard(`${prefix}rate:{bulk:carol}`)).toBe(0);
    } finally {
      own.disconnect();
    }
  });

  it('a refusal answered while a late consume still counted is not remembered past its give-back', async () => {
    const once = { limit: 1, windowMs: 60_000 };
    expect(await limiter.consume('warm-up:dave', once)).toMatchObject({ allowed: true });
    const own = new Redis(server.url);
    try {
      await own.call('CLIENT', 'PAUSE', '700', 'ALL');
      // C outlives commandTimeoutMs; D, sent near the end of the stall, is answered in time and
      // refused: C counted. C's give-back is sent after D.
      const late = limiter.consume('login:dave', once).catch((err: unknown) => err);
      await new Promise((r) => setTimeout(r, 500));
      const refused = await limiter.consume('login:dave', once);
      expect(await late).toBeInstanceOf(RedisUnavailableError);
      expect(refused).toMatchObject({ allowed: false });
      await waitFor(
        'the give-back',
        async () => (await own.exists(`${prefix}rate:{login:dave}`)) === 0,
      );
      // A call answered after the give-back's reply on this instance's connection.
      await limiter.consume('after:dave', once);
      // Redis admits the next call: this instance asks it, instead of repeating D's refusal.
      expect(await limiter.consume('login:dave', once)).toMatchObject({ allowed: true });
    } finally {
      own.disconnect();
    }
  });

  it('a consume that failed while Redis was down counts nothing once Redis is back', async () => {
    const login = { limit: 3, windowMs: 60_000 };
    expect(await limiter.consume('warm-up', login)).toMatchObject({ allowed: true });
    await server.stop();
    // A call sent before the client saw the connection close may still run after the restart.
    const connection = app.get(RedisLockConnection);
    await waitFor('the client to see the connection closed', () => connection.disconnected);
    for (let i = 0; i < 3; i++) {
      await expect(limiter.consume('login:bob', login)).rejects.toBeInstanceOf(
        RedisUnavailableError,
      );
    }
    await server.restart();
    // Another key, until the client has reconnected.
    await consumesWork('consumes to work again after the restart', 20_000, 100);
    // The 3 failed attempts were not run late: bob has his 3.
    expect(await limiter.consume('login:bob', login)).toMatchObject({
      allowed: true,
      remaining: 2,
    });
  });
});
