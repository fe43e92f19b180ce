import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  LockReplicationError,
  LockService,
  LockUpgradeError,
  RedisLockOptionsError,
  RedisUnavailableError,
} from '../../lib';
import { startRedisServer } from '../support/redis-server';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import { LOCK_SCRIPTS } from '../../lib/lock/lock-scripts';
import {
  acquireFlags,
  LINE_ENTRY_TTL_MS,
  lockScriptKeys,
  sharedScriptKeys,
} from '../../lib/lock/lock-store';
import { exited, lineFrom, spawnTs } from '../support/child';
import {
  createLockApp,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';

describe("LockService mode: 'shared' (read-write lock)", () => {
  let redis: Redis;
  let app: INestApplicationContext;
  let locks: LockService;
  let prefix: string;

  beforeAll(() => {
    redis = redisClient();
  });
  afterAll(() => redis.disconnect());
  beforeEach(async () => {
    prefix = uniquePrefix('rw');
    app = await createLockApp({ keyPrefix: prefix });
    locks = app.get(LockService);
  });
  afterEach(() => app.close());

  it('3 processes of readers and writers: readers overlap, a writer is alone, writer fences strictly increase', async () => {
    const children = Array.from({ length: 3 }, () =>
      spawnTs('test/fixtures/rw-child.ts', [], {
        REDIS_URL: testRedisUrl(),
        PREFIX: prefix,
        READERS: '5',
        WRITERS: '2',
        ROUNDS: '4',
        HOLD_MS: '10',
      }),
    );
    const codes = await Promise.all(
      children.map(async (c) => {
        await lineFrom(c, /^done$/, 60_000);
        return exited(c);
      }),
    );
    expect(codes).toEqual([0, 0, 0]);
    expect(await redis.get(`${prefix}violations`)).toBeNull();
    expect(Number(await redis.get(`${prefix}maxReaders`))).toBeGreaterThanOrEqual(2);
    const fences = (await redis.lrange(`${prefix}fences`, 0, -1)).map(Number);
    expect(fences).toHaveLength(3 * 2 * 4);
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]);
  }, 60_000);

  it('a writer waiting behind a continuous stream of readers gets in within one reader generation', async () => {
    let writerAsked = false;
    let writerIn = false;
    let stop = false;
    /** Per reader loop: grants asked for after the writer asked and had before it got in. */
    const passed = [0, 0, 0, 0];
    const shared = { mode: 'shared', ttlMs: 10_000 } as const;
    // Each loop takes its next shared hold before letting go of the current one, so that the
    // readers never all let go at once: only fairness lets the writer in.
    const loops = passed.map(async (_, i) => {
      let held = await locks.acquire('stream', { ...shared, waitMs: 20_000 });
      while (!stop) {
        await new Promise((r) => setTimeout(r, 20 + i * 5));
        const asked = writerAsked;
        const next = await locks.tryAcquire('stream', shared);
        if (next && asked && !writerIn) passed[i]++;
        await held.release();
        held = next ?? (await locks.acquire('stream', { ...shared, waitMs: 20_000 }));
      }
      await held.release();
    });
    await waitFor(
      'readers holding',
      async () => (await redis.zcard(lockRedisKeys(prefix, 'stream').shared)) >= 2,
    );
    writerAsked = true;
    await locks.withLock(
      'stream',
      async () => {
        writerIn = true;
      },
      { waitMs: 5_000 },
    );
    stop = true;
    await Promise.all(loops);
    // Each loop may have had one grant in flight when the writer joined the line; none after.
    for (const n of passed) expect(n).toBeLessThanOrEqual(1);
  }, 30_000);

  it('refuses to upgrade shared to exclusive in the same call chain; shared inside exclusive joins', async () => {
    const err = await locks
      .withLock('up', () => locks.withLock('up', () => 'never'), { mode: 'shared' })
      .catch((e) => e);
    expect(err).toBeInstanceOf(LockUpgradeError);
    expect(err.message).toContain("lock 'up' is held in shared mode");
    // Released after the refusal: an exclusive lock is free.
    expect(await locks.tryAcquire('up')).not.toBeNull();
    await locks.release('up');
    const inner = await locks.withLock('up', (outer) =>
      locks.withLock('up', (lock) => lock === outer, { mode: 'shared' }),
    );
    expect(inner).toBe(true);
  });

  it('refuses an exclusive lock of several keys, one of them held shared by the call chain, at once', async () => {
    const err = await locks
      .withLock(
        'prices',
        () => locks.withLock(['other', 'prices'], () => 'never', { waitMs: 10_000 }),
        { mode: 'shared' },
      )
      .catch((e) => e);
    // It waited for its own read lock until waitMs (10 s) before: LockTimeoutError.
    expect(err).toBeInstanceOf(LockUpgradeError);
    expect(err.message).toContain("lock 'prices' is held in shared mode");
    expect(await locks.isLocked('other')).toBe(false);
  });

  it('shared locks: release, extend, isHeld, fence = the latest exclusive fence', async () => {
    const w = await locks.acquire('f');
    await w.release();
    const r = await locks.acquire('f', { mode: 'shared', ttlMs: 500 });
    expect(r.fence).toBe(w.fence);
    expect(await r.isHeld()).toBe(true);
    expect(await locks.isLocked('f')).toBe(true);
    expect(await r.extend(5_000)).toBe(true);
    expect(await locks.tryAcquire('f')).toBeNull();
    expect(await r.release()).toBe(true);
    expect(await r.isHeld()).toBe(false);
    const w2 = await locks.acquire('f');
    expect(w2.fence).toBeGreaterThan(w.fence);
    await w2.release();
  });

  it.each([
    [{ mode: 'read' }, 'mode'],
    [{ mode: 'shared', waitForReplicas: { replicas: 1, timeoutMs: 10 } }, 'waitForReplicas'],
  ])('rejects %j naming the option', async (options, option) => {
    const err = await locks.acquire('bad', options as never).catch((e) => e);
    expect(err).toBeInstanceOf(RedisLockOptionsError);
    expect(err.option).toBe(option);
  });

  it('a module-wide waitForReplicas applies to exclusive locks only: shared locks are granted', async () => {
    // No replica on the test server: an exclusive lock fails its wait, a shared one never waits.
    const waiting = await createLockApp({
      keyPrefix: prefix,
      waitForReplicas: { replicas: 1, timeoutMs: 10 },
    });
    try {
      const waitingLocks = waiting.get(LockService);
      const r = await waitingLocks.acquire('mw', { mode: 'shared' });
      expect(await r.extend(5_000)).toBe(true);
      expect(await r.release()).toBe(true);
      const err = await waitingLocks.acquire('mw').catch((e) => e);
      expect(err).toBeInstanceOf(LockReplicationError);
      expect(await locks.isLocked('mw')).toBe(false);
    } finally {
      await waiting.close();
    }
  });

  it('rejects shared mode on a multi-key lock', async () => {
    const err = await locks.acquire(['{m}a', '{m}b'], { mode: 'shared' }).catch((e) => e);
    expect(err).toBeInstanceOf(RedisLockOptionsError);
    expect(err.message).toContain("'exclusive' for a multi-key lock");
  });

  it('an attempt whose reply times out leaves no read hold behind once Redis runs it', async () => {
    // A server of its own: it is stalled on purpose.
    const server = await startRedisServer();
    const stalled = await createLockApp({
      redis: server.url,
      keyPrefix: prefix,
      commandTimeoutMs: 100,
    });
    const blocker = new Redis(server.url);
    const raw = new Redis(server.url);
    try {
      const { value, shared } = lockRedisKeys(prefix, 'ghost');
      const theirs = stalled.get(LockService);
      expect(await theirs.isLocked('ghost')).toBe(false);
      // Both scripts cached first: a NOSCRIPT would make the client send the attempt again with
      // EVAL after the stall, possibly behind this test's own reads below.
      await (await theirs.acquire('ghost', { mode: 'shared' })).release();
      // Redis is busy for 400 ms: the attempt's reply comes after its 100 ms bound.
      const busy = blocker.eval(
        "local s = redis.call('TIME') while true do local n = redis.call('TIME') " +
          'if (n[1] - s[1]) * 1000000 + n[2] - s[2] > 400000 then return 1 end end',
        0,
      );
      await new Promise((resolve) => setTimeout(resolve, 20));
      const err = await theirs.acquire('ghost', { mode: 'shared', ttlMs: 20_000 }).catch((e) => e);
      expect(err).toBeInstanceOf(RedisUnavailableError);
      await busy;
      await waitFor('the queued release ran', async () => (await raw.zcard(shared)) === 0);
      expect(await raw.exists(value)).toBe(0);
      const writer = await theirs.tryAcquire('ghost');
      expect(writer).not.toBeNull();
      await writer!.release();
    } finally {
      await stalled.close();
      blocker.disconnect();
      raw.disconnect();
      await server.stop();
    }
  });

  describe('a waiter that gives up serves whom its leaving lets in, without their next check', () => {
    const FENCE_TTL = 60_000;
    const granted = async (reply: Promise<unknown>) => ((await reply) as number[])[0] === 1;
    // What the service sends, script by script (tokens made up; nobody listens for the messages).
    const scripts = (name: string) => {
      const k = lockRedisKeys(prefix, name);
      return {
        k,
        acquire: (token: string, fair = true) =>
          LOCK_SCRIPTS.acquire.run(redis, lockScriptKeys([k]), [
            token,
            10_000,
            acquireFlags(true, fair, 'line'),
            FENCE_TTL,
            LINE_ENTRY_TTL_MS,
          ]),
        acquireShared: (token: string) =>
          LOCK_SCRIPTS.acquireShared.run(redis, sharedScriptKeys(k), [
            token,
            10_000,
            1,
            LINE_ENTRY_TTL_MS,
            0,
            1,
          ]),
        release: (token: string) =>
          LOCK_SCRIPTS.release.run(redis, lockScriptKeys([k]), [token, 0, FENCE_TTL]),
        releaseShared: (token: string) =>
          LOCK_SCRIPTS.releaseShared.run(redis, sharedScriptKeys(k), [token, 0, FENCE_TTL]),
        leaveLine: (token: string) =>
          LOCK_SCRIPTS.leaveLine.run(redis, sharedScriptKeys(k), [token, 0, FENCE_TTL]),
      };
    };

    it('a writer leaving lets in the readers behind it while readers hold the lock', async () => {
      const s = scripts('writer-leaves');
      expect(await granted(s.acquireShared('r1'))).toBe(true);
      expect(await granted(s.acquire('w'))).toBe(false);
      expect(await granted(s.acquireShared('r2'))).toBe(false);
      expect(await granted(s.acquireShared('r3'))).toBe(false);
      expect(await redis.zrange(s.k.line, 0, -1)).toEqual(['w', 'r2', 'r3']);

      expect(await s.leaveLine('w')).toEqual([0, expect.any(Number)]);
      // Before, r2 and r3 stayed in line until their next check, a second later.
      expect(await redis.zrange(s.k.shared, 0, -1)).toEqual(['r1', 'r2', 'r3']);
      expect(await redis.zcard(s.k.line)).toBe(0);
    });

    it('a reader woken by a release that gives up hands the free lock to the writer behind it', async () => {
      const s = scripts('woken-reader-leaves');
      expect(await granted(s.acquire('x'))).toBe(true);
      expect(await granted(s.acquireShared('r'))).toBe(false);
      expect(await granted(s.acquire('w'))).toBe(false);
      // The release frees the lock and wakes the reader first in line ('w r'), to race for it.
      expect(await s.release('x')).toBe(1);
      expect(await redis.exists(s.k.value)).toBe(0);

      // The reader gives up instead: the writer owns the lock now, with a new fence.
      const fence = Number(await redis.get(s.k.fence));
      expect(await s.releaseShared('r')).toBe(0);
      expect(await redis.get(s.k.value)).toBe('w');
      expect(Number(await redis.get(s.k.fence))).toBeGreaterThan(fence);
      expect(await redis.zrange(s.k.line, 0, -1)).toEqual([]);
    });

    it('a woken non-fair waiter that gives up hands the free lock to the fair one behind it', async () => {
      const s = scripts('woken-waiter-leaves');
      expect(await granted(s.acquire('x'))).toBe(true);
      expect(await granted(s.acquire('u', false))).toBe(false);
      expect(await granted(s.acquire('w'))).toBe(false);
      expect(await s.release('x')).toBe(1);
      expect(await redis.exists(s.k.value)).toBe(0);

      expect(await s.leaveLine('u')).toEqual([0, expect.any(Number)]);
      expect(await redis.get(s.k.value)).toBe('w');
      expect(await redis.zrange(s.k.line, 0, -1)).toEqual([]);
    });

    it('a waiter leaving a lock held exclusively changes nothing else', async () => {
      const s = scripts('held-leave');
      expect(await granted(s.acquire('x'))).toBe(true);
      expect(await granted(s.acquire('w1'))).toBe(false);
      expect(await granted(s.acquireShared('r'))).toBe(false);
      expect(await s.leaveLine('w1')).toEqual([0, expect.any(Number)]);
      expect(await redis.get(s.k.value)).toBe('x*');
      expect(await redis.zrange(s.k.line, 0, -1)).toEqual(['r']);
      expect(await redis.zcard(s.k.shared)).toBe(0);
    });

    it('a waiter handed the lock that leaves gives it back in the same script, to the next in line', async () => {
      const s = scripts('handed-leave');
      expect(await granted(s.acquire('x'))).toBe(true);
      expect(await granted(s.acquire('w1'))).toBe(false);
      expect(await granted(s.acquire('w2'))).toBe(false);
      // Handed to w1, which gave up meanwhile (a stall may keep it from a second call).
      expect(await s.release('x')).toBe(1);
      expect(await redis.get(s.k.value)).toBe('w1*');
      const fence = Number(await redis.get(s.k.fence));

      expect(await s.leaveLine('w1')).toEqual([1, expect.any(Number), fence]);
      expect(await redis.get(s.k.value)).toBe('w2');
      expect(Number(await redis.get(s.k.fence))).toBeGreaterThan(fence);
      expect(await redis.zrange(s.k.line, 0, -1)).toEqual([]);

      // The last one out frees it.
      expect(await s.leaveLine('w2')).toEqual([1, expect.any(Number), expect.any(Number)]);
      expect(await redis.exists(s.k.value)).toBe(0);
    });
  });
});
