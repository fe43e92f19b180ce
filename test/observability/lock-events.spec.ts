import type { INestApplicationContext } from '@nestjs/common';
import { LockService, RedisLockEvents, type LockLostEvent, type LockTimeoutEvent } from '../../lib';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';

describe('lock events (lock.lost, lock.timeout)', () => {
  let app: INestApplicationContext;
  let locks: LockService;
  let events: RedisLockEvents;
  const redis = redisClient();
  const prefix = uniquePrefix('lock-events');
  const lost: LockLostEvent[] = [];
  const timeouts: LockTimeoutEvent[] = [];

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    locks = app.get(LockService);
    events = app.get(RedisLockEvents);
    events.on('lock.lost', (e) => lost.push(e));
    events.on('lock.timeout', (e) => timeouts.push(e));
  });
  beforeEach(() => {
    lost.length = 0;
    timeouts.length = 0;
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  it('emits lock.timeout once per wait that runs out, with its keys; none for a granted lock', async () => {
    const held = await locks.acquire('busy');
    await expect(locks.acquire('busy', { waitMs: 30 })).rejects.toThrow('busy');
    expect(await locks.tryAcquire('busy')).toBeNull();
    await expect(locks.acquire(['busy', 'other'], { waitMs: 30 })).rejects.toThrow('busy');
    await held.release();
    await (await locks.acquire('busy')).release();
    expect(timeouts.map((t) => [t.keys, t.reason])).toEqual([
      [['busy'], 'timeout'],
      [['busy'], 'timeout'],
      [['busy', 'other'], 'timeout'],
    ]);
    expect(timeouts[0].waitedMs).toBeGreaterThanOrEqual(25);
  });

  it("emits lock.timeout with reason 'aborted' when the caller's signal aborts the wait", async () => {
    const held = await locks.acquire('aborted');
    const controller = new AbortController();
    const waiting = locks.acquire('aborted', { waitMs: 10_000, signal: controller.signal });
    await waitFor('the caller to wait', () => locks.localWaiters('aborted') === 1);
    controller.abort(new Error('gave up'));
    await expect(waiting).rejects.toThrow('gave up');
    await held.release();
    expect(timeouts.map((t) => [t.keys, t.reason])).toEqual([[['aborted'], 'aborted']]);
  });

  it("emits lock.lost 'taken' when an extension finds another holder, once", async () => {
    const lock = await locks.acquire('taken', { ttlMs: 10_000 });
    await redis.set(`${prefix}lock:{taken}`, 'someone-else');
    expect(await lock.extend()).toBe(false);
    expect(await lock.release()).toBe(false);
    expect(lost).toEqual([{ keys: ['taken'], reason: 'taken' }]);
    expect(lock.signal.aborted).toBe(true);
  });

  it("emits lock.lost 'expired' when a withLock callback outlives the TTL (no auto-extension)", async () => {
    await locks.withLock(
      'outlived',
      () =>
        waitFor('the TTL to run out', () =>
          redis.exists(`${prefix}lock:{outlived}`).then((n) => n === 0),
        ),
      { ttlMs: 100, autoExtend: false },
    );
    expect(lost).toEqual([{ keys: ['outlived'], reason: 'expired' }]);
  });

  it('emits nothing for locks acquired and released in time', async () => {
    await locks.withLock('fine', () => undefined, { ttlMs: 10_000 });
    const lock = await locks.acquire('fine2');
    expect(await lock.extend()).toBe(true);
    await lock.release();
    expect(lost).toEqual([]);
    expect(timeouts).toEqual([]);
  });
});
