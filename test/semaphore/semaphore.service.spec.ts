import 'reflect-metadata';
import { Logger, type INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  LockLostError,
  LockTimeoutError,
  RedisLockOptionsError,
  SemaphoreLimitError,
  SemaphoreService,
  SemaphoreTimeoutError,
} from '../../lib';
import { semaphoreRedisKeys } from '../../lib/semaphore/semaphore-keys';
import { exited, lineFrom, spawnTs } from '../support/child';
import {
  createLockApp,
  deferred,
  redisClient,
  settledAs,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';

describe('SemaphoreService', () => {
  let redis: Redis;
  let app: INestApplicationContext;
  let semaphores: SemaphoreService;
  let prefix: string;

  beforeAll(() => {
    redis = redisClient();
  });
  afterAll(() => redis.disconnect());
  beforeEach(async () => {
    prefix = uniquePrefix('sem');
    app = await createLockApp({ keyPrefix: prefix });
    semaphores = app.get(SemaphoreService);
  });
  afterEach(() => app.close());

  const child = (env: Record<string, string>) =>
    spawnTs('test/fixtures/semaphore-child.ts', [], {
      REDIS_URL: testRedisUrl(),
      PREFIX: prefix,
      ...env,
    });

  it('limit 5 over 6 processes x 8 callers: never more than 5 inside, grants in line order', async () => {
    // The test holds all 5 permits until every caller stands in line, so that the line's order
    // is the arrival order the grants must follow.
    const mine = await Promise.all(
      Array.from({ length: 5 }, () => semaphores.acquire('sem', { limit: 5 })),
    );
    const children = Array.from({ length: 6 }, () =>
      child({ MODE: 'crowd', CALLERS: '8', HOLD_MS: '15' }),
    );
    await Promise.all(children.map((c) => lineFrom(c, /^waiting$/, 60_000)));
    const { line } = semaphoreRedisKeys(prefix, 'sem');
    await waitFor('48 callers in line', async () => (await redis.zcard(line)) === 48, 30_000);
    const arrival = await redis.zrange(line, 0, -1);
    await Promise.all(mine.map((p) => p.release()));
    const codes = await Promise.all(
      children.map(async (c) => {
        await lineFrom(c, /^done$/, 60_000);
        return exited(c);
      }),
    );
    expect(codes).toEqual(Array(6).fill(0));
    expect(await redis.get(`${prefix}violations`)).toBeNull();
    // 5 at once was reached, so a limit of 4 or 6 would have been caught.
    expect(await redis.get(`${prefix}max`)).toBe('5');
    const grants = (await redis.lrange(`${prefix}grants`, 0, -1)).map((g) => g.split(' '));
    expect(grants).toHaveLength(48);
    // Fences are handed out in the order of grants (one counter in Redis).
    const byFence = [...grants].sort((a, b) => Number(a[0]) - Number(b[0])).map((g) => g[1]);
    expect(new Set(grants.map((g) => g[0])).size).toBe(48);
    expect(byFence).toEqual(arrival);
    // Nothing is left behind.
    await waitFor(
      'the semaphore keys gone',
      async () => (await redis.keys(`${prefix}*sem*`)).length === 0,
    );
  }, 180_000); // six child processes start (ts-node) and wait up to 60 s each: slow on a loaded machine

  it("a SIGKILLed holder's permit comes back after its TTL", async () => {
    const holder = child({ MODE: 'hold', LIMIT: '1', TTL_MS: '1500' });
    await lineFrom(holder, /^held$/, 30_000);
    holder.kill('SIGKILL');
    await exited(holder);
    expect(await semaphores.tryAcquire('sem', { limit: 1 })).toBeNull();
    const permit = await semaphores.acquire('sem', { limit: 1, waitMs: 10_000 });
    expect(await permit.isHeld()).toBe(true);
    await permit.release();
  }, 30_000);

  it('tryAcquire resolves null, acquire throws SemaphoreTimeoutError (a LockTimeoutError) naming the key', async () => {
    const a = await semaphores.acquire('busy', { limit: 2, permits: 2, ttlMs: 5_000 });
    expect(a.permits).toBe(2);
    expect(await semaphores.tryAcquire('busy', { limit: 2 })).toBeNull();
    const err = await semaphores.acquire('busy', { limit: 2, waitMs: 30 }).catch((e) => e);
    expect(err).toBeInstanceOf(SemaphoreTimeoutError);
    expect(err).toBeInstanceOf(LockTimeoutError);
    expect(err.key).toBe('busy');
    expect(err.message).toMatch(/semaphore 'busy': 1 of 2 permits not acquired within \d+ ms/);
    // The timed-out waiter left the line: a release frees the semaphore for the next caller.
    await a.release();
    const b = await semaphores.tryAcquire('busy', { limit: 2, permits: 2 });
    expect(b).not.toBeNull();
    await b!.release();
  });

  it('a waiter is handed permits on release, with a larger fence', async () => {
    const a = await semaphores.acquire('hand', { limit: 1 });
    const waiting = semaphores.acquire('hand', { limit: 1, waitMs: 10_000 });
    await waitFor(
      'a waiter in line',
      async () => (await redis.zcard(semaphoreRedisKeys(prefix, 'hand').line)) === 1,
    );
    await a.release();
    const b = await waiting;
    expect(b.fence).toBeGreaterThan(a.fence);
    expect(await b.isHeld()).toBe(true);
    expect(await a.isHeld()).toBe(false);
    await b.release();
  });

  it('permits whose TTL ran out abort their signal: read first after, or released after', async () => {
    const read = await semaphores.acquire('late', { limit: 2, ttlMs: 200 });
    const released = await semaphores.acquire('late', { limit: 2, ttlMs: 200 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Read for the first time after the TTL ran out: aborted at once.
    expect(read.signal.aborted).toBe(true);
    expect(read.signal.reason).toBeInstanceOf(LockLostError);
    // Released after the TTL ran out (its signal never read before): lost, not released.
    expect(await released.release()).toBe(false);
    expect(released.signal.aborted).toBe(true);
    expect(released.signal.reason).toBeInstanceOf(LockLostError);
    expect(await read.release()).toBe(false);
  });

  it('a call with another limit than the one in use names both values', async () => {
    const a = await semaphores.acquire('lim', { limit: 3 });
    const err = await semaphores.acquire('lim', { limit: 4 }).catch((e) => e);
    expect(err).toBeInstanceOf(SemaphoreLimitError);
    expect(err.message).toContain('in use with limit 3');
    expect(err.message).toContain('gave limit 4');
    await a.release();
    // Idle again: the limit may change.
    const b = await semaphores.acquire('lim', { limit: 4 });
    await b.release();
  });

  it.each([
    [{ limit: 0 }, 'limit', '0'],
    [{ limit: 1.5 }, 'limit', '1.5'],
    [{ limit: 3, permits: 4 }, 'permits', '4'],
    [{ limit: 3, permits: 0 }, 'permits', '0'],
    [{ limit: 3, ttlMs: -1 }, 'ttlMs', '-1'],
    [{ limit: 3, colour: 'red' }, 'colour', 'red'],
  ])('rejects bad options %j naming the option and value', async (options, option, value) => {
    const err = await semaphores.acquire('bad', options as never).catch((e) => e);
    expect(err).toBeInstanceOf(RedisLockOptionsError);
    expect(err.option).toBe(option);
    expect(err.message).toContain(value);
  });

  it('withPermit extends the permits while the callback runs and releases them after', async () => {
    let extended = false;
    await semaphores.withPermit(
      'ext',
      async (permit) => {
        const first = permit.expiresAt;
        await waitFor('an extension', () => permit.expiresAt > first, 5_000);
        extended = (await permit.isHeld()) && !permit.signal.aborted;
      },
      { limit: 1, ttlMs: 300 },
    );
    expect(extended).toBe(true);
    expect(await semaphores.tryAcquire('ext', { limit: 1 })).not.toBeNull();
  });

  it('an aborted waiter leaves the line', async () => {
    const a = await semaphores.acquire('abort', { limit: 1 });
    const ac = new AbortController();
    const waiting = semaphores.acquire('abort', { limit: 1, waitMs: 10_000, signal: ac.signal });
    const { line } = semaphoreRedisKeys(prefix, 'abort');
    await waitFor('a waiter in line', async () => (await redis.zcard(line)) === 1);
    ac.abort(new Error('stop'));
    await expect(waiting).rejects.toThrow('stop');
    await waitFor('the line empty', async () => (await redis.zcard(line)) === 0);
    await a.release();
  });

  it('shutdown tells waiting callers, leaves the line, and is never handed permits afterwards', async () => {
    const { holders, line } = semaphoreRedisKeys(prefix, 'closing');
    const held = await semaphores.acquire('closing', { limit: 1, ttlMs: 30_000 });
    const leaving = await createLockApp({ keyPrefix: prefix });
    const theirs = leaving.get(SemaphoreService);
    const waiting = Array.from({ length: 5 }, () =>
      settledAs(theirs.acquire('closing', { limit: 1, waitMs: 60_000 })),
    );
    await waitFor('5 waiters in line', async () => (await redis.zcard(line)) === 5);
    // One more whose first attempt is still on its way when the shutdown starts.
    waiting.push(settledAs(theirs.acquire('closing', { limit: 1, waitMs: 60_000 })));
    await leaving.close();
    expect(await Promise.all(waiting)).toEqual(
      new Array(6).fill(
        'RedisUnavailableError: Redis semaphore acquire failed: the module is shutting down',
      ),
    );
    expect(await redis.zcard(line)).toBe(0);
    // The holder's release finds nobody: the permit is free, not handed to the instance that left.
    expect(await held.release()).toBe(true);
    expect(await redis.zcard(holders)).toBe(0);
    await expect(theirs.acquire('closing', { limit: 1 })).rejects.toThrow('shutting down');
  });

  it("shutdown aborts a running withPermit callback's signal before its permit goes to another instance", async () => {
    const leaving = await createLockApp({ keyPrefix: prefix });
    const order: string[] = [];
    let reason: unknown;
    const [started, finish] = [deferred(), deferred()];
    const running = leaving.get(SemaphoreService).withPermit(
      'report',
      async (permit) => {
        permit.signal.addEventListener('abort', () => {
          reason = permit.signal.reason;
          order.push('holder told');
        });
        started.resolve();
        await finish.promise;
      },
      { limit: 1 },
    );
    // Running, not only granted in Redis: a grant whose reply comes after the shutdown began is
    // given back instead.
    await started.promise;
    const next = semaphores.acquire('report', { limit: 1, waitMs: 20_000 }).then((p) => {
      order.push('other instance granted');
      return p;
    });
    await leaving.close();
    const permit = await next;
    expect(order).toEqual(['holder told', 'other instance granted']);
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as Error).message).toBe(
      "lock 'report' was lost: semaphore permits: the module shut down and released them",
    );
    // Its own release at the end finds it released already: nothing is sent on the closed
    // connection, and nothing is logged.
    const warn = jest.spyOn(Logger.prototype, 'warn');
    finish.resolve();
    await running;
    expect(warn.mock.calls).toEqual([]);
    warn.mockRestore();
    await permit.release();
  });
});
