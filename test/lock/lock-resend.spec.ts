import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import { SCHEDULE_SCRIPTS } from '../../lib/schedule/schedule-scripts';
import {
  createLockApp,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitForLocalWaiters,
} from '../support/helpers';
import { startReplyCuttingProxy, type ReplyCuttingProxy } from '../support/reply-cutting-proxy';

/**
 * ioredis sends a command again when its connection closed before the reply (a `Cluster` after
 * `retryDelayOnFailover`, a `Redis` when it reconnects). After a master is killed once its
 * replica had a script's writes, the promoted replica runs the same call a second time, and the
 * caller sees only the second reply. The proxy here drops the first reply and closes the
 * connection (Redis ran the call): a script run twice must still answer what the first run did.
 */
describe('lock scripts sent twice (a reply lost with the connection)', () => {
  let proxy: ReplyCuttingProxy;
  let app: INestApplicationContext;
  let locks: LockService;
  let redis: Redis;
  const prefix = uniquePrefix('resend');

  beforeAll(async () => {
    proxy = await startReplyCuttingProxy(testRedisUrl());
    app = await createLockApp({ redis: proxy.url, keyPrefix: prefix });
    locks = app.get(LockService);
    redis = redisClient();
    // Every path once first, so that Redis has the scripts and the cut calls are EVALSHAs that
    // run (a NOSCRIPT answer would run nothing).
    await (await locks.acquire(['warm-a{w}', 'warm-b{w}'])).release();
    const warm = await locks.acquire('warm', { fencing: true });
    const handedOver = locks.acquire('warm', { fencing: true, waitMs: 5_000 });
    await waitForLocalWaiters(locks, 'warm', 1);
    await warm.release();
    await (await handedOver).release();
  });
  afterAll(async () => {
    await app.close();
    await proxy.close();
    redis.disconnect();
  });

  /** The RESP bytes of a script call's first two keys: the lock's value and fence keys. */
  function lockCall(name: string): string {
    const k = lockRedisKeys(prefix, name);
    return `${k.value}\r\n$${k.fence.length}\r\n${k.fence}\r\n`;
  }

  it('an uncontended acquire run twice is granted, with a fence, and the lock holds its token', async () => {
    proxy.cutAfter(lockCall('fast'));
    const lock = await locks.tryAcquire('fast', { fencing: true });
    expect([proxy.cuts, proxy.seen(lockCall('fast'))]).toEqual([1, 2]);
    expect(lock).not.toBeNull();
    expect(lock!.fence).toBeGreaterThan(0);
    expect(await redis.get(lockRedisKeys(prefix, 'fast').value)).toMatch(/^[^*]+$/);
    expect(await lock!.release()).toBe(true);
    expect(await redis.exists(lockRedisKeys(prefix, 'fast').value)).toBe(0);
  });

  it('a multi-key acquire run twice is granted and holds every lock', async () => {
    const names = ['multi-a{t}', 'multi-b{t}'];
    proxy.cutAfter(lockCall(names[0]));
    const lock = await locks.tryAcquire(names, { fencing: true });
    expect([proxy.cuts, proxy.seen(lockCall(names[0]))]).toEqual([2, 2]);
    expect(lock).not.toBeNull();
    expect(await locks.tryAcquire(names[1])).toBeNull();
    expect(await lock!.release()).toBe(true);
    expect(await redis.exists(...names.map((n) => lockRedisKeys(prefix, n).value))).toBe(0);
  });

  it("a cohort's local handoff run twice hands the lock to the next caller, who holds it", async () => {
    const first = await locks.acquire('handoff', { fencing: true });
    const next = locks.acquire('handoff', { fencing: true, waitMs: 5_000 });
    await waitForLocalWaiters(locks, 'handoff', 1);
    proxy.cutAfter(lockCall('handoff'));
    await first.release();
    const second = await next;
    expect([proxy.cuts, proxy.seen(lockCall('handoff'))]).toEqual([3, 2]);
    expect(second.fence).toBeGreaterThan(first.fence!);
    expect(await second.release()).toBe(true);
    expect(await redis.exists(lockRedisKeys(prefix, 'handoff').value)).toBe(0);
  });

  it('a tick start run twice still tells the instance to run the tick', async () => {
    const key = `${prefix}tick:{resend-job}`;
    const token = 'resend-token';
    const claim = ['once', '0', 0, 0, token, 5_000, 600_000, 10];
    const [claimed, tick] = (await SCHEDULE_SCRIPTS.claimTick.run(redis, [key], claim)) as [
      number,
      string,
    ];
    expect(claimed).toBe(1);
    const start = (by: string) => SCHEDULE_SCRIPTS.startTick.run(redis, [key], [tick, by]);
    expect(await start(token)).toBe(1);
    expect(await start(token)).toBe(1);
    expect(await start('another-token')).toBe(0);
  });
});
