import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { type Lock, LockService, RedisUnavailableError } from '../../lib';
import { createLockApp, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

describe('LockService when Redis is down', () => {
  let server: RedisServer;
  let app: INestApplicationContext;
  let locks: LockService;

  beforeAll(async () => {
    server = await startRedisServer();
    app = await createLockApp({
      redis: server.url,
      keyPrefix: uniquePrefix('unavailable'),
      commandTimeoutMs: 300,
    });
    locks = app.get(LockService);
  });
  afterAll(async () => {
    await app.close();
    await server.stop();
  });

  it('fails with RedisUnavailableError within its bound, then works again after a restart', async () => {
    const before = await locks.acquire('outage');
    await before.release();
    await server.stop();

    const started = Date.now();
    const err = await locks.acquire('outage', { waitMs: 100 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RedisUnavailableError);
    expect((err as Error).message).toMatch(/^Redis lock acquire failed: /);
    // Bounded by commandTimeoutMs (300 ms), not by reconnect loops; generous margin for CI.
    expect(Date.now() - started).toBeLessThan(5_000);
    await expect(locks.isLocked('outage')).rejects.toBeInstanceOf(RedisUnavailableError);

    await server.restart();
    // Until the client has reconnected (its backoff, slower on a loaded machine), a call still
    // fails with the same typed error; then locks work again.
    let after: Lock | undefined;
    await waitFor(
      'locks to work again after the restart',
      async () => {
        after = await locks.acquire('outage', { waitMs: 1_000 }).catch((e: unknown) => {
          if (!(e instanceof RedisUnavailableError)) throw e;
          return undefined;
        });
        return after !== undefined;
      },
      20_000,
      100,
    );
    expect(await after!.release()).toBe(true);
  });
});
