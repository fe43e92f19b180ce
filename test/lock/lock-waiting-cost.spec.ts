import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import { commandCalls, createLockApp, redisClient, uniquePrefix } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/** Commands the server ran since the last CONFIG RESETSTAT, the counting's own left out. */
async function commandsSinceReset(redis: Redis): Promise<Record<string, number>> {
  const calls = Object.fromEntries(await commandCalls(redis));
  delete calls.info;
  delete calls['config|resetstat'];
  delete calls.config;
  return calls;
}

describe('LockService.acquire on a free key', () => {
  // A server of its own, so that command counts are this file's alone.
  let server: RedisServer;
  let redis: Redis;
  let app: INestApplicationContext;
  let locks: LockService;
  const prefix = uniquePrefix('lock-waiting-cost');

  beforeAll(async () => {
    server = await startRedisServer();
    redis = redisClient(server.url);
    app = await createLockApp({ redis: server.url, keyPrefix: prefix });
    locks = app.get(LockService);
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
    await server.stop();
  });

  /** The commands of `pairs` acquire + release pairs in `loops` concurrent loops, a key each. */
  async function commandsOf(waitMs: number, loops: number, pairs: number) {
    const keys = Array.from({ length: loops }, (_, i) => `free:${waitMs}:${loops}:${i}`);
    // Each key once before counting: a new fence counter costs a few commands more.
    await Promise.all(keys.map(async (k) => (await locks.acquire(k, { waitMs })).release()));
    await redis.config('RESETSTAT');
    await Promise.all(
      keys.map(async (k) => {
        for (let n = 0; n < pairs; n++) await (await locks.acquire(k, { waitMs })).release();
      }),
    );
    return { calls: await commandsSinceReset(redis), keys };
  }

  it('sends exactly the commands of a try when it waits (waitMs 600000): serial', async () => {
    const tried = await commandsOf(0, 1, 20);
    const waited = await commandsOf(600_000, 1, 20);
    expect(waited.calls).toEqual(tried.calls);
    // One script per acquire and one per release; nothing for waiting.
    expect(waited.calls.evalsha).toBe(40);
    for (const waiting of ['subscribe', 'ssubscribe', 'zadd', 'hset', 'publish']) {
      expect(waited.calls[waiting]).toBeUndefined();
    }
  });

  it('sends exactly the commands of a try when it waits: 16 concurrent callers, a key each', async () => {
    const tried = await commandsOf(0, 16, 10);
    const waited = await commandsOf(600_000, 16, 10);
    expect(waited.calls).toEqual(tried.calls);
    expect(waited.calls.evalsha).toBe(2 * 16 * 10);
  });

  it('leaves nothing behind for waiting: no subscription, no line, no local waiter', async () => {
    const { keys } = await commandsOf(600_000, 4, 5);
    for (const name of keys) {
      const k = lockRedisKeys(prefix, name);
      const [, subscribers] = (await redis.pubsub('NUMSUB', k.channel)) as [string, number];
      expect(Number(subscribers)).toBe(0);
      expect(await redis.exists(k.line, k.entries)).toBe(0);
      expect(locks.localWaiters(name)).toBe(0);
    }
  });
});
