import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { LockService } from '../../lib';
import { exited, lineFrom, spawnTs } from '../support/child';
import {
  createLockApp,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitFor,
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
    const env = { REDIS_URL: testRedisUrl(), PREFIX: prefix, MODE: 'sections', SECTIONS: '500' };
    const children = Array.from({ length: 4 }, () =>
      spawnTs('test/fixtures/lock-child.ts', [], env),
    );
    const codes = await Promise.all(
      children.map(async (child) => {
        await lineFrom(child, /^done 500$/, 90_000);
        return exited(child);
      }),
    );
    expect(codes).toEqual([0, 0, 0, 0]);
    expect(Number(await redis.get(`${prefix}counter`))).toBe(2_000);
    expect(await redis.get(`${prefix}violations`)).toBeNull();
  }, 120_000);

  it('a killed waiter does not stall the line beyond its entry deadline', async () => {
    const key = 'killed-waiter';
    const line = `${prefix}lock:{${key}}:line`;
    const entries = `${prefix}lock:{${key}}:entries`;
    const holder = await locks.acquire(key, { ttlMs: 30_000 });
    const child = spawnTs('test/fixtures/lock-child.ts', [], {
      REDIS_URL: testRedisUrl(),
      PREFIX: prefix,
      KEY: key,
      MODE: 'wait',
    });
    await lineFrom(child, /^started$/);
    await waitFor('the child in line', async () => (await redis.zcard(line)) === 1, 10_000);
    const [childToken] = await redis.zrange(line, 0, 0);
    const second = locks.acquire(key, { waitMs: 20_000 });
    await waitFor('a second waiter in line', async () => (await redis.zcard(line)) === 2);

    child.kill('SIGKILL');
    await exited(child);
    // The child's entry lapses once it stops renewing it...
    const deadline = Number((await redis.hget(entries, childToken))!.split(':')[0]);
    await waitFor(
      "the killed waiter's entry deadline",
      async () => {
        const [s, us] = await redis.time();
        return Number(s) * 1000 + Math.floor(Number(us) / 1000) > deadline;
      },
      10_000,
      20,
    );
    // ...so the release skips it and hands the lock to the next live waiter.
    expect(await holder.release()).toBe(true);
    const lock = await second;
    expect(await redis.get(`${prefix}lock:{${key}}`)).toBe(lock.token);
    expect(lock.fence).toBe(holder.fence + 1);
    expect(await redis.zscore(line, childToken)).toBeNull();
    await lock.release();
  }, 30_000);
});
