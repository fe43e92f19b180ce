import 'reflect-metadata';
import { Logger, type INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { LockLostError, LockService, RedisLockEvents } from '../../lib';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import { exited, lineFrom, spawnTs } from '../support/child';
import {
  createLockApp,
  deferred,
  redisClient,
  settledAs,
  sleep,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';

const STOPPED = 'RedisUnavailableError: Redis lock acquire failed: the module is shutting down';

describe('LockService at shutdown', () => {
  let redis: Redis;
  let prefix: string;
  let other: INestApplicationContext;

  beforeAll(() => {
    redis = redisClient();
  });
  afterAll(() => redis.disconnect());
  beforeEach(async () => {
    prefix = uniquePrefix('lock-shutdown');
    other = await createLockApp({ keyPrefix: prefix });
  });
  afterEach(() => other.close());

  it('a holder still running learns by its signal that it lost the lock before anyone else gets it', async () => {
    const leaving = await createLockApp({ keyPrefix: prefix });
    const order: string[] = [];
    const lost: unknown[] = [];
    leaving.get(RedisLockEvents).on('lock.lost', (e) => lost.push(e));
    let reason: unknown;
    const [started, finish] = [deferred(), deferred()];
    const running = leaving.get(LockService).withLock('report', async (lock) => {
      lock.signal.addEventListener('abort', () => {
        reason = lock.signal.reason;
        order.push('holder told');
      });
      started.resolve();
      await finish.promise;
    });
    // Running, not only granted in Redis: a grant whose reply comes after the shutdown began is
    // given back instead (tested below).
    await started.promise;
    const next = other
      .get(LockService)
      .acquire('report', { waitMs: 20_000 })
      .then((lock) => {
        order.push('other instance granted');
        return lock;
      });
    await leaving.close();
    const lock = await next;
    expect(order).toEqual(['holder told', 'other instance granted']);
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as Error).message).toBe(
      "lock 'report' was lost: the module shut down and released it",
    );
    expect(lost).toEqual([{ keys: ['report'], reason: 'shutdown' }]);
    // Its own release at the end finds it released already: nothing is sent on the closed
    // connection, and nothing is logged.
    const warn = jest.spyOn(Logger.prototype, 'warn');
    finish.resolve();
    await running;
    expect(warn.mock.calls).toEqual([]);
    warn.mockRestore();
    await lock.release();
  });

  it('fails multi-key and shared waiters, and holds none of their keys afterwards', async () => {
    const locks = other.get(LockService);
    const heldA = await locks.acquire('a', { ttlMs: 30_000 });
    const heldC = await locks.acquire('c', { ttlMs: 30_000 });
    const leaving = await createLockApp({ keyPrefix: prefix });
    const theirs = leaving.get(LockService);
    const waiting = [
      settledAs(theirs.acquire(['a', 'b'], { waitMs: 60_000, ttlMs: 30_000 })),
      settledAs(theirs.acquire('c', { mode: 'shared', waitMs: 60_000, ttlMs: 30_000 })),
      settledAs(theirs.acquire('c', { waitMs: 60_000, ttlMs: 30_000 })),
    ];
    await sleep(100);
    const closing = leaving.close();
    // The holder lets go while the instance shuts down.
    await Promise.all([heldA.release(), heldC.release()]);
    await closing;
    expect(await Promise.all(waiting)).toEqual([STOPPED, STOPPED, STOPPED]);
    for (const name of ['a', 'b', 'c']) {
      const { value, shared } = lockRedisKeys(prefix, name);
      expect([name, await redis.exists(value, shared)]).toEqual([name, 0]);
    }
  });

  it('fails a waiter whose first attempt is in flight when the shutdown starts, instead of leaving it to its waitMs', async () => {
    const held = await other.get(LockService).acquire('inflight', { ttlMs: 30_000 });
    const leaving = await createLockApp({ keyPrefix: prefix });
    // The attempt is sent now; the shutdown starts in the same tick, before its reply (refused).
    const waiting = settledAs(
      leaving.get(LockService).acquire('inflight', { waitMs: 3_000, ttlMs: 30_000 }),
    );
    await leaving.close();
    // Before, it waited in the closed cohort (and the shutdown with it) and then timed out.
    expect(await waiting).toBe(STOPPED);
    expect(await held.release()).toBe(true);
    expect(await redis.exists(lockRedisKeys(prefix, 'inflight').value)).toBe(0);
  });

  it('fails a local waiter whose handoff found the lock lapsed while the shutdown started', async () => {
    const leaving = await createLockApp({ keyPrefix: prefix });
    const locks = leaving.get(LockService);
    const held = await locks.acquire('lapsed', { ttlMs: 30_000 });
    const waiting = settledAs(locks.acquire('lapsed', { waitMs: 3_000, ttlMs: 30_000 }));
    await waitFor('the local waiter', async () => locks.localWaiters('lapsed') === 1);
    // Gone from Redis (evicted, or deleted by hand): the release's local handoff finds it so.
    await redis.del(lockRedisKeys(prefix, 'lapsed').value);
    const releasing = held.release();
    await leaving.close();
    expect(await releasing).toBe(false);
    // Before, it was put back in the closed cohort's line and waited there for its waitMs.
    expect(await waiting).toBe(STOPPED);
  });

  it('lets many callers of a process wait outside a line without a listener-leak warning', async () => {
    const held = await other.get(LockService).acquire(['x', 'y'], { ttlMs: 30_000 });
    const child = spawnTs('test/fixtures/many-waiters-child.ts', [], {
      REDIS_URL: testRedisUrl(),
      PREFIX: prefix,
    });
    expect(await lineFrom(child, /^ended /, 60_000)).toBe('ended 30 RedisUnavailableError');
    expect(await lineFrom(child, /^warnings/)).toBe('warnings ');
    await exited(child);
    await held.release();
  }, 90_000);
});
