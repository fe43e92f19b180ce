import type { INestApplicationContext } from '@nestjs/common';
import { LockService, RedisLockOptionsError } from '../../lib';
import { lineFrom, spawnTs } from '../support/child';
import { createLockApp, testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';

describe('LockService.inspect', () => {
  const prefix = uniquePrefix('inspect');
  let app: INestApplicationContext;
  let locks: LockService;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix, instanceId: 'the-test' });
    locks = app.get(LockService);
  });
  afterAll(() => app.close());

  const child = (mode: string, instanceId: string) =>
    spawnTs('test/fixtures/lock-child.ts', [], {
      REDIS_URL: testRedisUrl(),
      PREFIX: prefix,
      KEY: 'shared',
      MODE: mode,
      MODULE_OPTIONS_JSON: JSON.stringify({ instanceId }),
    });

  it('shows a free lock as free', async () => {
    const seen = await locks.inspect('nobody');
    expect(seen).toEqual({ key: 'nobody', held: false, line: [], lineLength: 0, localWaiters: 0 });
  });

  it('shows its own holder with owner, TTL and fence, and its local waiters', async () => {
    const lock = await locks.acquire('own', { ttlMs: 30_000 });
    const waiter = locks.acquire('own', { waitMs: 30_000 });
    await waitFor('the local caller to wait', () => locks.localWaiters('own') === 1);
    const seen = await locks.inspect('own');
    expect(seen).toMatchObject({ held: true, owner: 'the-test', fence: lock.fence });
    expect(seen.ttlMs).toBeGreaterThan(0);
    expect(seen.ttlMs).toBeLessThanOrEqual(30_000);
    expect(seen.localWaiters).toBe(1);
    await lock.release();
    await (await waiter).release();
  });

  it('shows a holder in another process and a line of 3 processes in the order they came', async () => {
    const holder = child('hold', 'holder-A');
    const fence = Number((await lineFrom(holder, /^held \d+/, 60_000)).split(' ')[1]);
    const waiters = ['waiter-1', 'waiter-2', 'waiter-3'];
    for (const [i, id] of waiters.entries()) {
      const w = child('wait', id);
      await lineFrom(w, /^started/, 60_000);
      await waitFor(
        `${id} in line`,
        async () => (await locks.inspect('shared')).line.length === i + 1,
        15_000,
        20,
      );
    }
    const seen = await locks.inspect('shared');
    expect(seen).toMatchObject({ key: 'shared', held: true, owner: 'holder-A', fence });
    expect(seen.ttlMs).toBeGreaterThan(0);
    expect(seen.line.map((e) => [e.owner, e.mode])).toEqual(waiters.map((id) => [id, 'handoff']));
    const since = seen.line.map((e) => e.since);
    expect([...since].sort((a, b) => a - b)).toEqual(since);
    expect(Math.abs(since[0] - Date.now())).toBeLessThan(60_000);
    expect(seen.lineLength).toBe(3);
    expect(seen.localWaiters).toBe(0);
    // Four ts-node children start one after another: on a loaded machine that alone can take 30 s.
  }, 120_000);

  it('names the owners of shared holders (their tokens carry the instance tag too)', async () => {
    const other = await createLockApp({ keyPrefix: prefix, instanceId: 'reader-B' });
    try {
      const mine = await locks.acquire('read', { mode: 'shared', ttlMs: 30_000 });
      const theirs = await other
        .get(LockService)
        .acquire('read', { mode: 'shared', ttlMs: 60_000 });
      const seen = await locks.inspect('read');
      expect(seen).toMatchObject({ key: 'read', held: true, lineLength: 0 });
      expect(seen.owner).toBeUndefined();
      // Shortest TTL first (the shared holders' zset is ordered by expiry).
      expect(seen.sharedHolders?.map((h) => h.owner)).toEqual(['the-test', 'reader-B']);
      expect(Math.abs(seen.sharedHolders![0].since - Date.now())).toBeLessThan(60_000);
      await theirs.release();
      await mine.release();
      expect((await locks.inspect('read')).held).toBe(false);
    } finally {
      await other.close();
    }
  });

  it('validates its key and the instanceId option (typed errors)', async () => {
    await expect(locks.inspect('')).rejects.toThrow('lock');
    await expect(createLockApp({ instanceId: '' })).rejects.toThrow(RedisLockOptionsError);
    await expect(createLockApp({ instanceId: 'x'.repeat(201) })).rejects.toThrow(
      /instanceId.*200 printable/,
    );
  });
});
