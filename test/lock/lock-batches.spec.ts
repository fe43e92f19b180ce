import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  type Lock,
  LockService,
  LockTimeoutError,
  RedisLockOptionsError,
  type LockBatchFn,
} from '../../lib';
import { exited, lineFrom, spawnTs } from '../support/child';
import {
  createLockApp,
  deferred,
  redisClient,
  testRedisUrl,
  uniquePrefix,
} from '../support/helpers';

describe('LockService.withLockBatch', () => {
  let redis: Redis;
  let app: INestApplicationContext;
  let locks: LockService;

  beforeAll(() => {
    redis = redisClient();
  });
  afterAll(() => redis.disconnect());
  afterEach(async () => {
    await app?.close();
  });

  const start = async (prefix: string) => {
    app = await createLockApp({ redis: testRedisUrl(), keyPrefix: prefix });
    locks = app.get(LockService);
  };

  it('serves 200 concurrent callers of one process in few batches, each item once, in submission order, one batch at a time', async () => {
    await start(uniquePrefix('batch-one'));
    const batches: number[][] = [];
    let inside = 0;
    let overlaps = 0;
    const fn: LockBatchFn<number, string> = async (items, lock) => {
      if (++inside > 1) overlaps++;
      expect(locks.currentLock('hot')).toBe(lock);
      batches.push(items);
      await redis.incrby(`${lock.token}:n`, items.length);
      inside--;
      return items.map((i) => `item ${i} fence ${lock.fence}`);
    };
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) => locks.withLockBatch('hot', i, fn, { maxBatch: 50 })),
    );
    answers.forEach((a, i) => expect(a).toMatch(new RegExp(`^item ${i} fence \\d+$`)));
    expect(overlaps).toBe(0);
    // The first caller starts a batch of its own; the 199 submitted meanwhile wait for the next
    // ones, at most 50 each.
    expect(batches[0]).toEqual([0]);
    expect(batches.length).toBe(1 + Math.ceil(199 / 50));
    expect(batches.flat()).toEqual(Array.from({ length: 200 }, (_, i) => i));
    for (const b of batches) expect(b.length).toBeLessThanOrEqual(50);
    // Each batch had a lock (and fence) of its own.
    const fences = answers.map((a) => Number(a.split(' ').pop()));
    expect(new Set(fences).size).toBe(batches.length);
  });

  it('rejects one caller for an Error result, every caller of a batch whose fn throws, and a result list of the wrong length with RedisLockOptionsError', async () => {
    await start(uniquePrefix('batch-errors'));
    const gate = deferred();
    const picky: LockBatchFn<string, string> = async (items) => {
      await gate.promise;
      return items.map((i) => (i === 'bad' ? new Error(`refused ${i}`) : `ok ${i}`));
    };
    const first = locks.withLockBatch('k', 'first', picky);
    const rest = ['a', 'bad', 'b'].map((i) => locks.withLockBatch('k', i, picky));
    gate.resolve();
    await expect(first).resolves.toBe('ok first');
    const settled = await Promise.allSettled(rest);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((settled[1] as PromiseRejectedResult).reason).toEqual(new Error('refused bad'));

    const failing: LockBatchFn<string, string> = () => {
      throw new Error('boom');
    };
    const both = await Promise.allSettled(
      ['x', 'y'].map((i) => locks.withLockBatch('k', i, failing)),
    );
    expect(both.map((s) => (s as PromiseRejectedResult).reason?.message)).toEqual(['boom', 'boom']);

    const short: LockBatchFn<string, string> = () => [];
    const err = await locks.withLockBatch('k', 'x', short).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RedisLockOptionsError);
    expect((err as RedisLockOptionsError).option).toBe('fn');
    expect((err as Error).message).toContain('an array of 1 results');
    // The lock was released each time.
    expect(await locks.isLocked('k')).toBe(false);
  });

  it('rejects the whole batch with LockTimeoutError when the lock stays taken past waitMs', async () => {
    await start(uniquePrefix('batch-timeout'));
    const held = await locks.acquire('busy');
    let ran = 0;
    const fn: LockBatchFn<number, number> = (items) => {
      ran++;
      return items;
    };
    const results = await Promise.allSettled(
      [1, 2, 3].map((i) => locks.withLockBatch('busy', i, fn, { waitMs: 50 })),
    );
    for (const r of results) {
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(LockTimeoutError);
    }
    expect(ran).toBe(0);
    await held.release();
    await expect(locks.withLockBatch('busy', 4, fn)).resolves.toBe(4);
  });

  it('combines only calls with the same function object and key', async () => {
    await start(uniquePrefix('batch-identity'));
    const seen: string[][] = [];
    const make =
      (name: string): LockBatchFn<string, string> =>
      async (items: string[], lock: Lock) => {
        seen.push(items.map((i) => `${name}:${i}:${lock.keys[0]}`));
        await redis.ping();
        return items;
      };
    const wait = { waitMs: 5_000 };
    const f = make('f');
    const g = make('g');
    await Promise.all([
      locks.withLockBatch('k1', '1', f, wait),
      locks.withLockBatch('k1', '2', f, wait),
      locks.withLockBatch('k1', '3', f, wait),
      locks.withLockBatch('k1', '4', g, wait),
      locks.withLockBatch('k2', '5', f, wait),
    ]);
    expect(seen.flat().sort()).toEqual(['f:1:k1', 'f:2:k1', 'f:3:k1', 'f:5:k2', 'g:4:k1']);
    // '2' and '3' came while f's first batch on k1 ran: one batch; nothing else was combined.
    expect(seen.find((b) => b.includes('f:2:k1'))).toEqual(['f:2:k1', 'f:3:k1']);
    expect(seen.find((b) => b.includes('g:4:k1'))).toEqual(['g:4:k1']);
  });

  it('refuses bad input with RedisLockOptionsError naming it', async () => {
    await start(uniquePrefix('batch-input'));
    const fn: LockBatchFn<number, number> = (items) => items;
    const cases: Array<[string, () => Promise<unknown>]> = [
      ['maxBatch', () => locks.withLockBatch('k', 1, fn, { maxBatch: 0 })],
      ['maxBatch', () => locks.withLockBatch('k', 1, fn, { maxBatch: 1.5 })],
      [
        'signal',
        () => locks.withLockBatch('k', 1, fn, { signal: new AbortController().signal } as never),
      ],
      ['skipIfLocked', () => locks.withLockBatch('k', 1, fn, { skipIfLocked: true } as never)],
      ['fn', () => locks.withLockBatch('k', 1, 'nope' as never)],
      ['ttlMs', () => locks.withLockBatch('k', 1, fn, { ttlMs: -1 })],
    ];
    for (const [option, call] of cases) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect((err as RedisLockOptionsError).option).toBe(option);
    }
    expect(await locks.isLocked('k')).toBe(false);
  });

  it('3 processes x 40 callers x 5 items: exact counter, no overlap, fences strictly increasing batch after batch', async () => {
    const prefix = uniquePrefix('batch-procs');
    const children = ['a', 'b', 'c'].map((tag) =>
      spawnTs('test/fixtures/cohort-child.ts', [], {
        REDIS_URL: testRedisUrl(),
        PREFIX: prefix,
        MODE: 'batch',
        TAG: tag,
        CALLERS: '40',
        SECTIONS: '5',
        MAX_BATCH: '16',
        GO_KEY: `${prefix}go`,
      }),
    );
    await Promise.all(children.map((c) => lineFrom(c, /^started$/, 60_000)));
    await redis.set(`${prefix}go`, '1');
    const codes = await Promise.all(
      children.map(async (c) => {
        await lineFrom(c, /^done$/, 90_000);
        return exited(c);
      }),
    );
    expect(codes).toEqual([0, 0, 0]);
    expect(Number(await redis.get(`${prefix}counter`))).toBe(3 * 40 * 5);
    expect(await redis.get(`${prefix}violations`)).toBeNull();
    const log = (await redis.lrange(`${prefix}log`, 0, -1)).map((l) => l.split(' '));
    const sizes = log.map(([, , size]) => Number(size));
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(600);
    for (const size of sizes) expect(size).toBeLessThanOrEqual(16);
    // Combining happened: far fewer acquisitions than items.
    expect(log.length).toBeLessThan(600 / 2);
    for (let i = 1; i < log.length; i++) {
      expect(Number(log[i][0])).toBeGreaterThan(Number(log[i - 1][0]));
    }
  }, 120_000);
});
