import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { LockService } from '../../lib';
import { LOCK_SCRIPTS } from '../../lib/lock/lock-scripts';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import { acquireFlags, LINE_ENTRY_TTL_MS } from '../../lib/lock/lock-store';
import { SingleNodeLockStore } from '../../lib/lock/single-node-lock-store';
import { resolveLockOptions } from '../../lib/options/resolve-options';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import {
  commandCalls,
  createLockApp,
  redisClient,
  uniquePrefix,
  waitForLine,
  scriptsIn,
} from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

describe('LockService handoff and fairness', () => {
  // A server of its own, so that its command counts are this file's alone.
  let server: RedisServer;
  let redis: Redis;
  let holderApp: INestApplicationContext;
  let waiterApp: INestApplicationContext;
  let holder: LockService;
  let waiter: LockService;
  const prefix = uniquePrefix('handoff');

  beforeAll(async () => {
    server = await startRedisServer();
    redis = redisClient(server.url);
    // Cohorts off: every caller stands in the Redis line itself, which is what this file tests
    // (cohorts: lock-cohorts.spec.ts).
    holderApp = await createLockApp({ redis: server.url, keyPrefix: prefix, maxLocalHandoffs: 0 });
    waiterApp = await createLockApp({ redis: server.url, keyPrefix: prefix, maxLocalHandoffs: 0 });
    holder = holderApp.get(LockService);
    waiter = waiterApp.get(LockService);
  });
  afterAll(async () => {
    await holderApp.close();
    await waiterApp.close();
    redis.disconnect();
    await server.stop();
  });

  it('a blocked waiter is handed the lock by the release itself: no poll, no extra command', async () => {
    const held = await holder.acquire('h');
    await redis.config('RESETSTAT');
    const waiting = waiter.acquire('h', { waitMs: 60_000 });
    await waitForLine(redis, prefix, 'h');
    const beforeRelease = await commandCalls(redis);
    // One try, one attempt that joins the line (after subscribing to the lock's channel and to
    // the instance's waiter channel, on which the handoff comes).
    expect(scriptsIn(beforeRelease)).toBe(2);
    expect(beforeRelease.get('subscribe')).toBe(2);

    await redis.config('RESETSTAT');
    await held.release();
    const lock = await waiting;
    const afterRelease = await commandCalls(redis);
    // Only the release ran: the waiter owned the lock when the release script ended.
    expect(scriptsIn(afterRelease)).toBe(1);
    expect(await redis.get(`${prefix}lock:{h}`)).toBe(lock.token);
    expect(lock.fence).toBeGreaterThan(held.fence);
    expect(lock.expiresAt).toBeGreaterThan(Date.now() + 25_000);
    await lock.release();
  });

  it('serves 5 queued waiters first come, first served, also when the releaser asks again at once', async () => {
    const first = await holder.acquire('fifo');
    const order: string[] = [];
    const done: Promise<void>[] = [];
    for (let i = 1; i <= 5; i++) {
      const service = i % 2 ? waiter : holder;
      done.push(
        service.acquire('fifo', { waitMs: 30_000 }).then(async (lock) => {
          order.push(`w${i}`);
          await lock.release();
        }),
      );
      await waitForLine(redis, prefix, 'fifo', i);
    }
    await first.release();
    done.push(
      holder.acquire('fifo', { waitMs: 30_000 }).then(async (lock) => {
        order.push('releaser');
        await lock.release();
      }),
    );
    await Promise.all(done);
    expect(order).toEqual(['w1', 'w2', 'w3', 'w4', 'w5', 'releaser']);
  });

  it('a newcomer cannot barge past the line when the lock lapses without a release', async () => {
    await holder.acquire('lapsed', { ttlMs: 1_500 });
    const queued = waiter.acquire('lapsed', { waitMs: 30_000 });
    await waitForLine(redis, prefix, 'lapsed');
    // Expiry publishes nothing; deleting the key from outside does the same, at a known moment.
    await redis.del(`${prefix}lock:{lapsed}`);
    expect(await holder.tryAcquire('lapsed')).toBeNull();
    const err = (await holder.acquire('lapsed').catch((e: unknown) => e)) as Error;
    expect(err.message).toMatch(/other waiters were first in line/);
    // The waiter tries again when the holder's TTL it last saw runs out, and is first in line.
    const lock = await queued;
    expect(await lock.isHeld()).toBe(true);
    await lock.release();
  });

  it('fair: false waiters stand in line only to be woken: a release frees the lock and wakes one', async () => {
    const keys = lockRedisKeys(prefix, 'unfair');
    const held = await holder.acquire('unfair', { fair: false });
    const waiting = waiter.acquire('unfair', { waitMs: 30_000, fair: false });
    const second = waiter.acquire('unfair', { waitMs: 30_000, fair: false });
    await waitForLine(redis, prefix, 'unfair', 2);
    const entries = Object.values(await redis.hgetall(keys.entries));
    expect(entries.every((e) => e.endsWith(':w'))).toBe(true);
    await redis.config('RESETSTAT');
    await held.release();
    const lock = await waiting;
    // The release deleted the key and woke the first waiter only: its one retry took the lock.
    const calls = await commandCalls(redis);
    expect(scriptsIn(calls)).toBe(2);
    expect(calls.get('publish')).toBe(1);
    expect(await lock.isHeld()).toBe(true);
    // Barging is allowed: the releaser takes the free lock at once when nobody holds it.
    await lock.release();
    const next = await second;
    await next.release();
    const barger = await holder.acquire('unfair', { fair: false });
    expect(await barger.isHeld()).toBe(true);
    await barger.release();
  });
  it('a newcomer to a line renews its expiry: a line whose waiters all get the lock before their first renewal stays alive', async () => {
    const k = lockRedisKeys(prefix, 'expiry');
    // What a waiting acquire of the lock sends (fair, fenced, waits in line).
    const stand = (token: string) =>
      LOCK_SCRIPTS.acquire.run(
        redis,
        [k.value, k.fence],
        [token, 10_000, acquireFlags(true, true, 'line'), 60_000, LINE_ENTRY_TTL_MS],
      );
    await redis.set(k.value, 'holder', 'PX', 60_000);
    expect(await stand('first')).toEqual([0, expect.any(Number), expect.any(Number), 1]);
    // Nobody renewed it since (each waiter got the lock within a second): about to expire.
    await redis.pexpire(k.line, 50);
    await redis.pexpire(k.entries, 50);
    expect(await stand('second')).toEqual([0, expect.any(Number), expect.any(Number), 2]);
    expect(await redis.zrange(k.line, 0, -1)).toEqual(['first', 'second']);
    expect(await redis.hget(k.entries, 'second')).toMatch(/^\d+:10000:1:h$/);
    for (const key of [k.line, k.entries])
      expect(await redis.pttl(key)).toBeGreaterThan(2 * LINE_ENTRY_TTL_MS - 1_000);
    // The first checking again keeps its place.
    expect(await stand('first')).toEqual([0, expect.any(Number), expect.any(Number), 2]);
    expect(await redis.zrange(k.line, 0, -1)).toEqual(['first', 'second']);
    await redis.del(k.value, k.line, k.entries, k.fence);
  });

  it('a handoff found by a check (its message lost) is dated from the handoff: expiresAt within the PTTL', async () => {
    const k = lockRedisKeys(prefix, 'found');
    const o = resolveLockOptions(holderApp.get(RedisLockConnection).options.lock, {
      ttlMs: 10_000,
    });
    // A waiter stands in line; the holder's release hands the lock to its token (10 s TTL).
    await redis.set(k.value, 'holder', 'PX', 60_000);
    await LOCK_SCRIPTS.acquire.run(
      redis,
      [k.value, k.fence],
      ['waiter', 10_000, acquireFlags(true, true, 'line'), 60_000, LINE_ENTRY_TTL_MS],
    );
    expect(
      await LOCK_SCRIPTS.release.run(redis, [k.value, k.fence], ['holder', 0, 60_000, '']),
    ).toBe(1);
    expect(await redis.get(k.value)).toBe('waiter');
    // The 'h' message was lost; 6 s later the waiter checks again (after re-subscribing).
    await redis.pexpire(k.value, 4_000);
    const store = new SingleNodeLockStore(holderApp.get(RedisLockConnection));
    const found = await store.attempt([k], 'waiter', o, 'line');
    expect(found.granted).toBe(true);
    expect(found.fences).toEqual([Number(await redis.get(k.fence))]);
    const pttl = await redis.pttl(k.value);
    expect(found.expiresAt - Date.now()).toBeLessThanOrEqual(pttl);
    await redis.del(k.value, k.line, k.entries, k.fence);
  });
});
