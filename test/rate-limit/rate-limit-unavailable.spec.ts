import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { RateLimiterService, RedisUnavailableError } from '../../lib';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import { createLockApp, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

describe('RateLimiterService when Redis is down (dedicated redis-server)', () => {
  let server: RedisServer;
  let app: INestApplicationContext;
  let limiter: RateLimiterService;

  beforeAll(async () => {
    server = await startRedisServer();
    app = await createLockApp({
      redis: server.url,
      keyPrefix: uniquePrefix('rate-unavailable'),
      commandTimeoutMs: 300,
    });
    limiter = app.get(RateLimiterService);
  });
  afterAll(async () => {
    await app.close();
    await server.stop();
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
    await waitFor(
      'consumes to work again after the restart',
      async () =>
        (await limiter.consume('probe', { limit: 1_000, windowMs: 60_000 }).catch(() => null)) !==
        null,
      20_000,
      100,
    );
    // The 3 failed attempts were not run late: bob has his 3.
    expect(await limiter.consume('login:bob', login)).toMatchObject({
      allowed: true,
      remaining: 2,
    });
  });
});
