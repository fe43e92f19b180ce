import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { RedisUnavailableError, SemaphoreService, type Permit } from '../../lib';
import { semaphoreRedisKeys } from '../../lib/semaphore/semaphore-keys';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/**
 * An acquisition that outlives `commandTimeoutMs` rejects with `RedisUnavailableError`, but Redis
 * runs it all the same once a stall ends: what it was granted goes straight back, instead of being
 * held by a token nobody has for its whole TTL.
 */
describe('SemaphoreService: an acquisition answered after commandTimeoutMs', () => {
  let server: RedisServer;
  let admin: Redis;
  let app: INestApplicationContext;
  let semaphores: SemaphoreService;
  let prefix: string;

  beforeAll(async () => {
    server = await startRedisServer();
    admin = redisClient(server.url);
  });
  beforeEach(async () => {
    prefix = uniquePrefix('sem-stall');
    app = await createLockApp({ redis: server.url, keyPrefix: prefix, commandTimeoutMs: 300 });
    semaphores = app.get(SemaphoreService);
  });
  afterEach(() => app.close());
  afterAll(async () => {
    admin.disconnect();
    await server.stop();
  });

  /**
   * `call`'s first answer once the stall is over. Sent on the module's connection, so behind the
   * timed-out calls and what undoes them: it sees what they left.
   */
  async function answered<T>(call: () => Promise<T>): Promise<T> {
    let result: { value: T } | undefined;
    await waitFor(
      'an answer after the stall',
      async () => {
        try {
          result = { value: await call() };
          return true;
        } catch (err) {
          if (err instanceof RedisUnavailableError) return false;
          throw err;
        }
      },
      3_000,
    );
    return result!.value;
  }

  it('a timed-out acquisition that runs after the stall gives its permits back', async () => {
    // Scripts cached on the connection: the stalled call is an EVALSHA, as on a busy service.
    await (await semaphores.acquire('warm', { limit: 1 })).release();
    await admin.client('PAUSE', 700, 'ALL');
    await expect(
      semaphores.acquire('s', { limit: 2, permits: 2, ttlMs: 20_000 }),
    ).rejects.toBeInstanceOf(RedisUnavailableError);
    const next = await answered(() => semaphores.tryAcquire('s', { limit: 2, permits: 2 }));
    // Before: null, both permits held for 20 s by the failed acquisition's token.
    expect(next).not.toBeNull();
    expect(await admin.zrange(semaphoreRedisKeys(prefix, 's').holders, 0, -1)).toEqual([
      next!.token,
    ]);
  });

  it('a waiter whose first attempt timed out leaves the line: a release hands the permit to the next caller', async () => {
    const holder = await semaphores.acquire('w', { limit: 1, ttlMs: 20_000 });
    await admin.client('PAUSE', 700, 'ALL');
    await expect(
      semaphores.acquire('w', { limit: 1, ttlMs: 20_000, waitMs: 5_000 }),
    ).rejects.toBeInstanceOf(RedisUnavailableError);
    expect(await answered(() => holder.isHeld())).toBe(true);
    const { line } = semaphoreRedisKeys(prefix, 'w');
    expect(await admin.zcard(line)).toBe(0);
    expect(await holder.release()).toBe(true);
    // Before: null, the permit handed to the token of the caller that was told it failed.
    const next = await semaphores.tryAcquire('w', { limit: 1 });
    expect(next).not.toBeNull();
  });

  it('after a SCRIPT FLUSH on a live connection: the late reply of the attempt gives its permits back again', async () => {
    // The acquire script was sent on this connection (EVALSHA next time), leave-line never was
    // (EVAL): after the flush, the attempt's NOSCRIPT fallback reaches Redis after its undo.
    const warm: Permit = await semaphores.acquire('warm', { limit: 1, ttlMs: 20_000 });
    await admin.script('FLUSH');
    await admin.client('PAUSE', 600, 'ALL');
    await expect(semaphores.acquire('flushed', { limit: 1, ttlMs: 20_000 })).rejects.toBeInstanceOf(
      RedisUnavailableError,
    );
    // That first answer may precede the attempt's late reply (both were sent again after their
    // NOSCRIPT, the attempt first); a call made after it is sent behind the second undo.
    await (await answered(() => semaphores.tryAcquire('flushed', { limit: 1 })))?.release();
    // Before: null, the permit held by the failed attempt's token for its 20 s.
    expect(await semaphores.tryAcquire('flushed', { limit: 1 })).not.toBeNull();
    await warm.release();
  });
});
