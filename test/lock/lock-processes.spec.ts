import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import { exited, lineFrom, spawnTs } from '../support/child';
import { expectExactCounter } from '../support/exact-counter';
import {
  createLockApp,
  redisClient,
  redisTimeMs,
  testRedisUrl,
  uniquePrefix,
  waitFor,
  waitForLine,
} from '../support/helpers';

describe('LockService across OS processes', () => {
  const prefix = uniquePrefix('processes');
  let redis: Redis;
  let app: INestApplicationContext;
  let locks: LockService;

  beforeAll(async () => {
    redis = redisClient();
    app = await createLockApp({ keyPrefix: prefix });
    locks = app.get(LockService);
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  it('mutual exclusion: 4 processes x 500 read-modify-write sections leave an exact counter and never two holders', async () => {
    await expectExactCounter({
      processes: 4,
      sections: 500,
      env: { REDIS_URL: testRedisUrl() },
      counter: redis,
      prefix,
    });
  }, 120_000);

  it('a killed waiter does not stall the line beyond its entry deadline', async () => {
    const key = 'killed-waiter';
    const { value, line, entries } = lockRedisKeys(prefix, key);
    const holder = await locks.acquire(key, { ttlMs: 30_000 });
    const child = spawnTs('test/fixtures/lock-child.ts', [], {
      REDIS_URL: testRedisUrl(),
      PREFIX: prefix,
      KEY: key,
      MODE: 'wait',
    });
    await lineFrom(child, /^started$/);
    await waitForLine(redis, prefix, key, 1, 10_000);
    const [childToken] = await redis.zrange(line, 0, 0);
    // Another instance (a caller of the holder's own process would wait in its local cohort).
    const other = await createLockApp({ keyPrefix: prefix });
    const second = other.get(LockService).acquire(key, { waitMs: 20_000 });
    await waitForLine(redis, prefix, key, 2);

    child.kill('SIGKILL');
    await exited(child);
    // The child's entry lapses once it stops renewing it...
    const deadline = Number((await redis.hget(entries, childToken))!.split(':')[0]);
    await waitFor(
      "the killed waiter's entry deadline",
      async () => (await redisTimeMs(redis)) > deadline,
      10_000,
      20,
    );
    // ...so the release skips it and hands the lock to the next live waiter.
    expect(await holder.release()).toBe(true);
    const lock = await second;
    expect(await redis.get(value)).toBe(lock.token);
    expect(lock.fence).toBeGreaterThan(holder.fence);
    expect(await redis.zscore(line, childToken)).toBeNull();
    await lock.release();
    await other.close();
  }, 30_000);
});
