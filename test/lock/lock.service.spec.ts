import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  Lock,
  LockKeyError,
  LockLostError,
  LockService,
  LockTimeoutError,
  RedisLockEvents,
  RedisLockOptionsError,
} from '../../lib';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import {
  createLockApp,
  deferred,
  redisClient,
  sleep,
  uniquePrefix,
  waitFor,
  waitForLine,
} from '../support/helpers';

describe('LockService', () => {
  const prefix = uniquePrefix('lock-service');
  let app: INestApplicationContext;
  let other: INestApplicationContext;
  let locks: LockService;
  let rival: LockService;
  let redis: Redis;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    other = await createLockApp({ keyPrefix: prefix });
    locks = app.get(LockService);
    rival = other.get(LockService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    await other.close();
    redis.disconnect();
  });

  describe('acquire / release', () => {
    it('takes a free lock with a random token, a TTL and a fence, and releases it', async () => {
      const before = Date.now();
      const lock = await locks.acquire('a', { ttlMs: 5_000 });
      expect(lock).toBeInstanceOf(Lock);
      expect(lock.keys).toEqual(['a']);
      expect(lock.token).toMatch(/^[0-9a-f]{43}$/);
      expect(lock.fence).toBeGreaterThan(0);
      // Send time + TTL, less the clock-drift allowance: 0.01 × 5000 + 2 ms.
      expect(lock.expiresAt).toBeGreaterThanOrEqual(before + 5_000 - 52);
      expect(lock.expiresAt).toBeLessThanOrEqual(Date.now() + 5_000 - 52);
      expect(await redis.get(`${prefix}lock:{a}`)).toBe(lock.token);
      const pttl = await redis.pttl(`${prefix}lock:{a}`);
      expect(pttl).toBeGreaterThan(4_000);
      expect(pttl).toBeLessThanOrEqual(5_000);
      expect(await lock.isHeld()).toBe(true);
      expect(await locks.isLocked('a')).toBe(true);
      expect(await lock.release()).toBe(true);
      expect(await redis.exists(`${prefix}lock:{a}`)).toBe(0);
      expect(await locks.isLocked('a')).toBe(false);
      expect(await lock.release()).toBe(false);
    });

    it('gives every acquisition a fresh token and a higher fence', async () => {
      const first = await locks.acquire('fresh');
      await first.release();
      const second = await locks.acquire('fresh');
      await second.release();
      expect(second.token).not.toBe(first.token);
      expect(second.fence).toBeGreaterThan(first.fence);
    });

    it('fencing: false leaves the fence counter alone and reports fence 0', async () => {
      const { fence } = lockRedisKeys(prefix, 'unfenced');
      await redis.del(fence);
      const lock = await locks.acquire('unfenced', { fencing: false });
      expect(lock.fence).toBe(0);
      expect(lock.fences).toEqual([0]);
      expect(await redis.exists(fence)).toBe(0);
      await lock.release();
      // The first fenced acquisition creates the counter, starting at Redis TIME in microseconds.
      const [seconds] = await redis.time();
      const fenced = await locks.acquire('unfenced');
      expect(fenced.fence).toBeGreaterThanOrEqual(Number(seconds) * 1e6);
      expect(Number(await redis.get(fence))).toBe(fenced.fence);
      await fenced.release();
    });

    it('distinct lock names share one fence counter: nothing is left per name once released', async () => {
      const names = Array.from({ length: 300 }, (_, i) => `distinct:${i}`);
      let last = 0;
      for (const name of names) {
        const lock = await locks.acquire(name);
        expect(lock.fence).toBeGreaterThan(last);
        last = lock.fence;
        await lock.release();
      }
      expect(await redis.keys(`${prefix}lock:{distinct:*`)).toEqual([]);
      expect(lockRedisKeys(prefix, names[0]).fence).toBe(`${prefix}lock-fence`);
      expect(Number(await redis.get(`${prefix}lock-fence`))).toBe(last);
    });

    it('throws LockTimeoutError at once when held and waitMs is 0, naming key and holder TTL', async () => {
      const held = await rival.acquire('busy', { ttlMs: 10_000 });
      const err = await locks.acquire('busy').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockTimeoutError);
      const timeout = err as LockTimeoutError;
      expect(timeout.name).toBe('LockTimeoutError');
      expect(timeout.key).toBe('busy');
      expect(timeout.waitedMs).toBe(0);
      expect(timeout.holderRemainingMs).toBeGreaterThan(9_000);
      expect(timeout.message).toMatch(
        /lock 'busy' not acquired within 0 ms; held by another owner for \d+ ms more/,
      );
      await held.release();
    });

    it('waits up to waitMs, then throws LockTimeoutError with the time waited', async () => {
      const held = await rival.acquire('slow', { ttlMs: 10_000 });
      const started = Date.now();
      const err = (await locks
        .acquire('slow', { waitMs: 300 })
        .catch((e) => e)) as LockTimeoutError;
      expect(err).toBeInstanceOf(LockTimeoutError);
      expect(Date.now() - started).toBeGreaterThanOrEqual(300);
      expect(err.waitedMs).toBeGreaterThanOrEqual(300);
      // It leaves the line right after giving up: the holder's release finds nobody to hand the
      // lock to.
      await waitForLine(redis, prefix, 'slow', 0);
      await held.release();
      expect(await redis.exists(`${prefix}lock:{slow}`)).toBe(0);
    });

    it('tryAcquire resolves null instead of throwing', async () => {
      const held = await rival.acquire('try');
      expect(await locks.tryAcquire('try')).toBeNull();
      await held.release();
      const lock = await locks.tryAcquire('try');
      expect(lock).toBeInstanceOf(Lock);
      await lock!.release();
    });

    it('a waiter gets the lock when the holder releases', async () => {
      const held = await rival.acquire('handoff');
      const waiting = locks.acquire('handoff', { waitMs: 5_000 });
      await waitForLine(redis, prefix, 'handoff');
      await held.release();
      const lock = await waiting;
      expect(await redis.get(`${prefix}lock:{handoff}`)).toBe(lock.token);
      expect(lock.fence).toBeGreaterThan(held.fence);
      await lock.release();
    });

    it('a waiter gets the lock when the holder lets it expire', async () => {
      const held = await rival.acquire('lapse', { ttlMs: 200 });
      const lock = await locks.acquire('lapse', { waitMs: 5_000 });
      expect(lock.fence).toBeGreaterThan(held.fence);
      await lock.release();
    });

    it('rejects with the signal reason when the wait is aborted, and leaves the line', async () => {
      const held = await rival.acquire('abort');
      const controller = new AbortController();
      const waiting = locks.acquire('abort', { waitMs: 10_000, signal: controller.signal });
      await waitForLine(redis, prefix, 'abort');
      controller.abort(new Error('user gave up'));
      await expect(waiting).rejects.toThrow('user gave up');
      // Its process leaves the line right after answering it (nobody else of it waits).
      await waitForLine(redis, prefix, 'abort', 0);
      await held.release();
    });
  });

  describe('expiry and ownership', () => {
    it('a holder that never releases loses the lock after ttlMs; its release/extend then touch nothing', async () => {
      const old = await rival.acquire('expire', { ttlMs: 150 });
      const lost = new Promise((resolve) => old.signal.addEventListener('abort', resolve));
      const next = await locks.acquire('expire', { waitMs: 5_000, ttlMs: 10_000 });
      expect(next.fence).toBeGreaterThan(old.fence);
      await lost;
      expect(old.signal.reason).toBeInstanceOf(LockLostError);
      expect(await old.release()).toBe(false);
      expect(await old.extend(10_000)).toBe(false);
      expect(await old.isHeld()).toBe(false);
      expect(await redis.get(`${prefix}lock:{expire}`)).toBe(next.token);
      expect(await next.isHeld()).toBe(true);
      await next.release();
    });

    it('a lock released, then released or extended again after its TTL, stays released: no lock.lost, no abort', async () => {
      const events = app.get(RedisLockEvents);
      const lostEvents: unknown[] = [];
      const off = events.on('lock.lost', (e) => lostEvents.push(e));
      const realNow = Date.now.bind(Date);
      const later = jest.spyOn(Date, 'now');
      try {
        const lock = await locks.acquire('released-twice', { ttlMs: 10_000 });
        expect(await lock.release()).toBe(true);
        // Its TTL is over by this process's clock.
        later.mockImplementation(() => realNow() + 60_000);
        expect(await lock.release()).toBe(false);
        expect(await lock.extend(1_000)).toBe(false);
        expect(lock.signal.aborted).toBe(false);
        expect(lostEvents).toEqual([]);
      } finally {
        later.mockRestore();
        off();
      }
    });

    it('extend sets a new TTL only for the owner', async () => {
      const lock = await locks.acquire('ext', { ttlMs: 1_000 });
      expect(await lock.extend(20_000)).toBe(true);
      expect(await redis.pttl(`${prefix}lock:{ext}`)).toBeGreaterThan(19_000);
      expect(lock.expiresAt).toBeGreaterThan(Date.now() + 19_000);
      expect(await locks.extend('ext', 30_000)).toBe(true);
      expect(await rival.extend('ext', 30_000)).toBe(false);
      await lock.release();
    });

    it('isHeld/release by key refer to what this instance holds', async () => {
      const lock = await rival.acquire('bykey');
      expect(await rival.isHeld('bykey')).toBe(true);
      expect(await locks.isHeld('bykey')).toBe(false);
      expect(await locks.release('bykey')).toBe(false);
      expect(await locks.isLocked('bykey')).toBe(true);
      expect(await rival.release('bykey')).toBe(true);
      expect(await lock.isHeld()).toBe(false);
    });

    it('key-based calls act on the lock held now, not on an earlier one that ran out unreleased', async () => {
      const value = `${prefix}lock:{rerun}`;
      await locks.acquire('rerun', { ttlMs: 100 });
      await waitFor('the first lock to expire', async () => (await redis.exists(value)) === 0);
      const current = await locks.acquire('rerun', { ttlMs: 10_000 });
      expect(await locks.isHeld('rerun')).toBe(true);
      expect(await locks.extend('rerun', 20_000)).toBe(true);
      expect(await redis.pttl(value)).toBeGreaterThan(10_000);
      expect(await locks.release('rerun')).toBe(true);
      expect(await redis.exists(value)).toBe(0);
      expect(await current.isHeld()).toBe(false);
    });

    it('forgets locks that ran out unreleased (a TTL used as a throttle does not grow memory)', async () => {
      const held = (locks as unknown as { held: Set<Lock> }).held;
      const throttles = () => [...held].filter((l) => l.keys[0].startsWith('throttle-')).length;
      // A TTL longer than the 20 acquisitions take, even on a loaded machine: the sweep (every
      // 5 s, already running for this file's other locks) must not find one run out before the
      // count below.
      for (let i = 0; i < 20; i++) await locks.acquire(`throttle-${i}`, { ttlMs: 2_000 });
      expect(throttles()).toBe(20);
      await waitFor('the expired locks to be dropped', async () => throttles() === 0, 15_000);
      expect(await locks.isHeld('throttle-0')).toBe(false);
    }, 20_000);

    it('releaseAll releases every lock this instance holds and nothing else', async () => {
      const mine = [await locks.acquire('all-1'), await locks.acquire('all-2')];
      const theirs = await rival.acquire('all-3');
      expect(await locks.releaseAll()).toBe(2);
      for (const l of mine) expect(await l.isHeld()).toBe(false);
      expect(await theirs.isHeld()).toBe(true);
      await theirs.release();
    });
  });

  describe('multi-key', () => {
    it('takes all keys or none', async () => {
      const b = await rival.acquire('m-b');
      expect(await locks.tryAcquire(['m-a', 'm-b', 'm-c'])).toBeNull();
      expect(await redis.exists(`${prefix}lock:{m-a}`, `${prefix}lock:{m-c}`)).toBe(0);
      await b.release();
      const all = await locks.acquire(['m-a', 'm-b', 'm-c']);
      expect(all.keys).toEqual(['m-a', 'm-b', 'm-c']);
      expect(all.fences).toHaveLength(3);
      for (const k of ['m-a', 'm-b', 'm-c'])
        expect(await redis.get(`${prefix}lock:{${k}}`)).toBe(all.token);
      expect(await rival.tryAcquire('m-c')).toBeNull();
      expect(await all.extend(10_000)).toBe(true);
      expect(await all.release()).toBe(true);
      expect(
        await redis.exists(`${prefix}lock:{m-a}`, `${prefix}lock:{m-b}`, `${prefix}lock:{m-c}`),
      ).toBe(0);
    });

    it('waits for every key', async () => {
      const a = await rival.acquire('w-a');
      const waiting = locks.acquire(['w-a', 'w-b'], { waitMs: 5_000 });
      // A waiter subscribes to the release channels only after its first attempt failed: once it
      // listens on w-b's, it has tried, and it waits without having taken w-b alone.
      const channel = lockRedisKeys(prefix, 'w-b').channel;
      await waitFor('the waiter to listen for releases of w-b', async () => {
        const [, subscribers] = (await redis.pubsub('NUMSUB', channel)) as [string, number];
        return subscribers === 1;
      });
      expect(await redis.exists(`${prefix}lock:{w-b}`)).toBe(0);
      await a.release();
      const both = await waiting;
      await both.release();
    });
  });

  describe('withLock', () => {
    it('runs fn under the lock and releases it, passing fn result through', async () => {
      const result = await locks.withLock('wl', async (lock) => {
        expect(await redis.get(`${prefix}lock:{wl}`)).toBe(lock.token);
        return 42;
      });
      expect(result).toBe(42);
      expect(await redis.exists(`${prefix}lock:{wl}`)).toBe(0);
    });

    it('a signal aborted while the grant is on its way: rejects with its reason, runs no fn, holds nothing', async () => {
      const shapes = [
        { key: 'aborted', o: {} },
        { key: ['aborted-a', 'aborted-b'], o: {} },
        { key: 'aborted-shared', o: { mode: 'shared' as const } },
      ];
      const ran: string[] = [];
      for (const { key, o } of shapes) {
        const controller = new AbortController();
        const name = String(key);
        const call = locks.withLock(key, () => ran.push(name), {
          ...o,
          waitMs: 5_000,
          signal: controller.signal,
        });
        // The first attempt is sent; its reply (granted) comes after the caller gave up.
        controller.abort(new Error(`gave up on ${name}`));
        await expect(call).rejects.toThrow(`gave up on ${name}`);
      }
      expect(ran).toEqual([]);
      for (const name of ['aborted', 'aborted-a', 'aborted-b', 'aborted-shared']) {
        const { value, shared } = lockRedisKeys(prefix, name);
        expect([name, await redis.exists(value, shared)]).toEqual([name, 0]);
      }
    });

    it('releases and rethrows when fn throws', async () => {
      const boom = new Error('boom');
      await expect(locks.withLock('wl-err', () => Promise.reject(boom))).rejects.toBe(boom);
      expect(await redis.exists(`${prefix}lock:{wl-err}`)).toBe(0);
    });

    it("never hides fn's error behind a release error", async () => {
      const boom = new Error('fn failed');
      const err = await locks
        .withLock('wl-release-err', async () => {
          // Replace the lock's value by a hash: the release script now fails with WRONGTYPE.
          await redis.del(`${prefix}lock:{wl-release-err}`);
          await redis.hset(`${prefix}lock:{wl-release-err}`, 'x', '1');
          throw boom;
        })
        .catch((e) => e);
      expect(err).toBe(boom);
      await redis.del(`${prefix}lock:{wl-release-err}`);
    });

    it('keeps the lock alive for 3x its TTL while fn runs', async () => {
      // Renewed once a third of the TTL has passed: with 1 s, a renewal may be ~660 ms late.
      const ttlMs = 1_000;
      await locks.withLock(
        'wl-extend',
        async (lock) => {
          await sleep(3 * ttlMs);
          expect(lock.signal.aborted).toBe(false);
          expect(await redis.get(`${prefix}lock:{wl-extend}`)).toBe(lock.token);
          expect(await rival.tryAcquire('wl-extend')).toBeNull();
        },
        { ttlMs },
      );
    });

    it('autoExtend: false lets the lock lapse after ttlMs while fn runs, aborting lock.signal', async () => {
      const reason = await locks.withLock(
        'wl-no-extend',
        async (lock) => {
          await new Promise((resolve) => lock.signal.addEventListener('abort', resolve));
          // The signal fires at send time + TTL, by design not later than Redis's own expiry (which
          // counts from when Redis ran the acquisition): the key goes at about the same moment.
          await waitFor(
            'the key to expire',
            async () => (await redis.exists(`${prefix}lock:{wl-no-extend}`)) === 0,
            1_000,
          );
          return lock.signal.reason;
        },
        { ttlMs: 200, autoExtend: false },
      );
      expect(reason).toBeInstanceOf(LockLostError);
    });

    it('aborts lock.signal with LockLostError when the key is deleted from outside', async () => {
      const reason = await locks.withLock(
        'wl-lost',
        async (lock) => {
          await redis.del(`${prefix}lock:{wl-lost}`);
          await new Promise((resolve) => lock.signal.addEventListener('abort', resolve));
          return lock.signal.reason;
        },
        { ttlMs: 300 },
      );
      expect(reason).toBeInstanceOf(LockLostError);
      expect((reason as LockLostError).message).toMatch(/'wl-lost' was lost/);
    });

    it('a nested withLock on the same key joins the held lock; others still wait', async () => {
      const order: string[] = [];
      await locks.withLock('reentrant', async (outer) => {
        const inner = await locks.withLock('reentrant', async (lock) => {
          order.push('inner');
          return lock;
        });
        expect(inner).toBe(outer);
        expect(locks.currentLock('reentrant')).toBe(outer);
        expect(await rival.tryAcquire('reentrant')).toBeNull();
        order.push('outer');
      });
      expect(order).toEqual(['inner', 'outer']);
      expect(locks.currentLock()).toBeUndefined();
    });

    it('work that outlives its withLock does not join the released lock: it waits for the lock like any caller', async () => {
      let later!: Promise<{ joined: boolean; held: boolean; rivalGot: boolean }>;
      let outerLock!: Lock;
      const outerDone = deferred<void>();
      await locks.withLock('outlived', async (outer) => {
        outerLock = outer;
        // Started under the lock, runs after its release.
        later = outerDone.promise.then(() => {
          expect(locks.currentLock('outlived')).toBeUndefined();
          return locks.withLock('outlived', async (inner) => ({
            joined: inner === outerLock,
            held: await inner.isHeld(),
            rivalGot: (await rival.tryAcquire('outlived')) !== null,
          }));
        });
      });
      outerDone.resolve();
      expect(await later).toEqual({ joined: false, held: true, rivalGot: false });
    });

    it("a lock's signal read first after its TTL ran out is aborted at once", async () => {
      const lock = await locks.acquire('late-read', { ttlMs: 200 });
      await sleep(300);
      const signal = lock.signal;
      expect(signal.aborted).toBe(true);
      expect(() => signal.throwIfAborted()).toThrow(LockLostError);
      expect(await lock.release()).toBe(false);
    });

    it("key-based release, extend and isHeld act on the module keyPrefix's lock, not one taken under another prefix", async () => {
      const mine = await locks.acquire('report', { ttlMs: 10_000 });
      const tenant = await locks.acquire('report', {
        ttlMs: 10_000,
        keyPrefix: `${prefix}tenant:`,
      });
      expect(await locks.extend('report', 20_000)).toBe(true);
      expect(await redis.pttl(`${prefix}lock:{report}`)).toBeGreaterThan(19_000);
      expect(await locks.isHeld('report')).toBe(true);
      expect(await locks.release('report')).toBe(true);
      expect(await mine.isHeld()).toBe(false);
      expect(await tenant.isHeld()).toBe(true);
      await tenant.release();
    });

    it.each(['{tenant}:', '{shop}:{eu}:', 'a}b{c}:'])(
      'accepts a per-call keyPrefix whose first brace opens a complete hash tag (%p)',
      async (tag) => {
        const lock = await locks.acquire('tagged', { keyPrefix: `${prefix}${tag}`, ttlMs: 10_000 });
        expect(await redis.get(`${prefix}${tag}lock:{tagged}`)).toBe(lock.token);
        expect(await lock.release()).toBe(true);
      },
    );

    it('gives every (keyPrefix, name) pair keys of its own, also when a NUL could join them either way', async () => {
      const one = await locks.acquire('a\0b', { keyPrefix: `${prefix}p`, ttlMs: 10_000 });
      // Another lock: prefix 'p\0a', name 'b'.
      const two = await locks.tryAcquire('b', { keyPrefix: `${prefix}p\0a`, ttlMs: 10_000 });
      expect(two).not.toBeNull();
      expect(await redis.get(`${prefix}p\0alock:{b}`)).toBe(two!.token);
      expect(await redis.get(`${prefix}plock:{a\0b}`)).toBe(one.token);
      expect(await one.release()).toBe(true);
      expect(await two!.release()).toBe(true);
    });
  });

  describe('bad input', () => {
    it.each([
      ['empty', '', /must not be empty/],
      ['number', 42, /must be a string, got 42/],
      ['null', null, /must be a string, got null/],
      ['513 bytes', 'x'.repeat(513), /513 bytes long; the limit is 512/],
      // Sent as UTF-8, each lone surrogate is U+FFFD: 'a\uD800' and 'a\uDFFF' would be one key.
      ['lone surrogate', 'acct:\uD800', /'acct:\uD800' is not well-formed Unicode/],
      ['listed lone surrogate', ['a', 'acct:\uDFFF'], /is not well-formed Unicode/],
      ['empty list', [], /list must not be empty/],
      ['duplicate list', ['a', 'a'], /duplicates/],
      ['list with a repeated name', ['a', 'b', 'a'], /duplicates: 'a'$/],
    ])('rejects a %s key with LockKeyError', async (_label, key, message) => {
      const err = await locks.acquire(key as string).catch((e) => e);
      expect(err).toBeInstanceOf(LockKeyError);
      expect(err.name).toBe('LockKeyError');
      expect(err.message).toMatch(message);
    });

    it.each([
      [{ ttlMs: 0 }, "'ttlMs'"],
      [{ ttlMs: -5 }, "'ttlMs'"],
      [{ ttlMs: 1.5 }, "'ttlMs'"],
      [{ waitMs: NaN }, "'waitMs'"],
      [{ waitMs: Infinity }, "'waitMs'"],
      [{ retryIntervalMs: '100' }, "'retryIntervalMs'"],
      [{ fair: 'yes' }, "'fair'"],
      [{ signal: {} }, "'signal'"],
      [{ ttl: 1000 }, "'ttl'"],
      // A first '{' that opens no complete, non-empty hash tag: CROSSSLOT on Cluster.
      [{ keyPrefix: 'app{' }, "'keyPrefix'"],
      [{ keyPrefix: 'app{}:' }, "'keyPrefix'"],
      [{ keyPrefix: 'a}b{' }, "'keyPrefix'"],
    ])('rejects options %p with RedisLockOptionsError naming %s', async (options, name) => {
      const err = await locks.acquire('opt', options as never).catch((e) => e);
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect(err.message).toContain(`invalid option ${name}`);
      expect(await redis.exists(`${prefix}lock:{opt}`)).toBe(0);
    });
  });
});
