import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { FlowError, LockService, QueueService, RateLimiterService } from '../../lib';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import { rateLimitRedisKey } from '../../lib/rate-limit/rate-limit-keys';
import { SCHEDULE_SCRIPTS } from '../../lib/schedule/schedule-scripts';
import {
  createLockApp,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitFor,
  waitForLine,
  waitForLocalWaiters,
} from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';
import { startReplyCuttingProxy, type ReplyCuttingProxy } from '../support/reply-cutting-proxy';

/**
 * ioredis sends a command again when its connection closed before the reply (a `Cluster` after
 * `retryDelayOnFailover`, a `Redis` when it reconnects). After a master is killed once its
 * replica had a script's writes, the promoted replica runs the same call a second time, and the
 * caller sees only the second reply. The proxy here drops the first reply and closes the
 * connection (Redis ran the call): a script run twice must still answer what the first run did.
 */
describe('scripts sent twice (a reply lost with the connection)', () => {
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

  /**
   * Runs `act` with the reply to the next call carrying `call` (RESP bytes) dropped once, and
   * checks that that call was sent twice: what `act` resolves with is the second run's answer.
   */
  async function sentTwice<T>(call: string, act: () => Promise<T>): Promise<T> {
    const cutsBefore = proxy.cuts;
    proxy.cutAfter(call);
    const result = await act();
    expect([proxy.cuts - cutsBefore, proxy.seen(call)]).toEqual([1, 2]);
    return result;
  }

  /** The RESP bytes of a script call's first two keys: the lock's value and fence keys. */
  function lockCall(name: string): string {
    const k = lockRedisKeys(prefix, name);
    return `${k.value}\r\n$${k.fence.length}\r\n${k.fence}\r\n`;
  }

  it('an uncontended acquire run twice is granted, with a fence, and the lock holds its token', async () => {
    const lock = await sentTwice(lockCall('fast'), () =>
      locks.tryAcquire('fast', { fencing: true }),
    );
    expect(lock).not.toBeNull();
    expect(lock!.fence).toBeGreaterThan(0);
    expect(await redis.get(lockRedisKeys(prefix, 'fast').value)).toMatch(/^[^*]+$/);
    expect(await lock!.release()).toBe(true);
    expect(await redis.exists(lockRedisKeys(prefix, 'fast').value)).toBe(0);
  });

  it('a multi-key acquire run twice is granted and holds every lock', async () => {
    const names = ['multi-a{t}', 'multi-b{t}'];
    const lock = await sentTwice(lockCall(names[0]), () =>
      locks.tryAcquire(names, { fencing: true }),
    );
    expect(lock).not.toBeNull();
    expect(await locks.tryAcquire(names[1])).toBeNull();
    expect(await lock!.release()).toBe(true);
    expect(await redis.exists(...names.map((n) => lockRedisKeys(prefix, n).value))).toBe(0);
  });

  it("a cohort's local handoff run twice hands the lock to the next caller, who holds it", async () => {
    const first = await locks.acquire('handoff', { fencing: true });
    const next = locks.acquire('handoff', { fencing: true, waitMs: 5_000 });
    await waitForLocalWaiters(locks, 'handoff', 1);
    const second = await sentTwice(lockCall('handoff'), async () => {
      await first.release();
      return next;
    });
    expect(second.fence).toBeGreaterThan(first.fence!);
    expect(await second.release()).toBe(true);
    expect(await redis.exists(lockRedisKeys(prefix, 'handoff').value)).toBe(0);
  });

  it("a release that rejoins the line, run twice, leaves the process in line: it gets the lock after the other process's turn", async () => {
    // Process `other` waits in the Redis line; after one local handoff with others waiting
    // (maxLocalHandoffs: 1), this process releases into the line and rejoins it for its next
    // local caller (docs/locks.md).
    const otherApp = await createLockApp({ keyPrefix: prefix, maxLocalHandoffs: 0 });
    const bounded = await createLockApp({
      redis: proxy.url,
      keyPrefix: prefix,
      maxLocalHandoffs: 1,
    });
    try {
      const other = otherApp.get(LockService);
      const mine = bounded.get(LockService);
      const first = await mine.acquire('rejoin', { fencing: true });
      const theirs = other.acquire('rejoin', { fencing: true, waitMs: 10_000 });
      await waitForLine(redis, prefix, 'rejoin', 1);
      const second = mine.acquire('rejoin', { fencing: true, waitMs: 10_000 });
      await waitForLocalWaiters(mine, 'rejoin', 1);
      await first.release();
      const secondLock = await second;
      const third = mine.acquire('rejoin', { fencing: true, waitMs: 10_000 });
      await waitForLocalWaiters(mine, 'rejoin', 1);
      const theirLock = await sentTwice(lockCall('rejoin'), async () => {
        await secondLock.release();
        return theirs;
      });
      expect(theirLock.fence).toBeGreaterThan(secondLock.fence!);
      await theirLock.release();
      const thirdLock = await third;
      expect(thirdLock.fence).toBeGreaterThan(theirLock.fence!);
      expect(await thirdLock.release()).toBe(true);
    } finally {
      await bounded.close();
      await otherApp.close();
    }
  });

  it.each([
    ['sliding-window', 's'],
    ['token-bucket', 't'],
  ] as const)(
    'a %s check run twice counts once and is answered as admitted',
    async (algorithm, code) => {
      const limiter = app.get(RateLimiterService);
      const options = { limit: 1, windowMs: 60_000, algorithm };
      // Loaded first (a NOSCRIPT answer would run nothing).
      await limiter.consume('warm', options);
      const name = `once-${algorithm}`;
      const key = rateLimitRedisKey(prefix, algorithm, name);
      const result = await sentTwice(`${key}\r\n$1\r\n${code}\r\n`, () =>
        limiter.consume(name, options),
      );
      expect(result).toMatchObject({ allowed: true, remaining: 0 });
      // The window's log holds the call once.
      if (algorithm === 'sliding-window') expect(await redis.zcard(key)).toBe(1);
      expect(await limiter.consume(name, options)).toMatchObject({ allowed: false });
    },
  );

  it('a flow added by a call run twice is reported added, once, and its parent waits for its children', async () => {
    const queues = app.get(QueueService);
    // Loaded first (a NOSCRIPT answer would run nothing).
    await queues.enqueueFlow({
      queue: 'resend-flow',
      id: 'warm',
      children: [{ queue: 'resend-flow', id: 'warm-child' }],
    });
    const payload = 'resend-root-payload';
    const ids = await sentTwice(payload, () =>
      queues.enqueueFlow({
        queue: 'resend-flow',
        id: 'root',
        payload,
        children: [{ queue: 'resend-flow', id: 'child' }],
      }),
    );
    expect(ids).toEqual({
      queue: 'resend-flow',
      id: 'root',
      children: [{ queue: 'resend-flow', id: 'child' }],
    });
    expect(await queues.get('resend-flow', 'root')).toMatchObject({
      state: 'waiting-children',
      children: { total: 1, completed: 0, failed: 0 },
    });
    // A second enqueueFlow of the same root is still refused.
    await expect(
      queues.enqueueFlow({
        queue: 'resend-flow',
        id: 'root',
        children: [{ queue: 'resend-flow', id: 'child-2' }],
      }),
    ).rejects.toThrow(FlowError);
  });

  it('a one-task flow added by a call run twice is reported added, once, and waits as a plain task', async () => {
    const queues = app.get(QueueService);
    // Loaded first (a NOSCRIPT answer would run nothing).
    await queues.enqueueFlow({ queue: 'resend-flow', id: 'warm-single' });
    const payload = 'resend-single-payload';
    const ids = await sentTwice(payload, () =>
      queues.enqueueFlow({ queue: 'resend-flow', id: 'single', payload }),
    );
    expect(ids).toEqual({ queue: 'resend-flow', id: 'single' });
    const task = await queues.get('resend-flow', 'single');
    expect(task).toMatchObject({ state: 'ready', payload });
    // Its record only marks the call: no children are reported.
    expect(task).not.toHaveProperty('children');
    // A second enqueueFlow of the same task is still refused.
    await expect(queues.enqueueFlow({ queue: 'resend-flow', id: 'single' })).rejects.toThrow(
      FlowError,
    );
  });

  it('an ack run twice answers acked, and the task is completed once', async () => {
    const queues = app.get(QueueService);
    await queues.enqueue('resend-ack', 'ack-once', { payload: 1 });
    const [task] = await queues.claim('resend-ack', 1, { leaseMs: 30_000 });
    const ack = '$3\r\nack\r\n$8\r\nack-once\r\n';
    expect(await sentTwice(ack, () => queues.ack(task, 'done'))).toBe(true);
    expect(await queues.get('resend-ack', 'ack-once')).toMatchObject({
      state: 'completed',
      attempts: 1,
      result: 'done',
    });
    // A stale lease's ack is still refused.
    await queues.enqueue('resend-ack', 'ack-stale', { payload: 2 });
    const [first] = await queues.claim('resend-ack', 1, { leaseMs: 30_000 });
    expect(await queues.nack(first, { delayMs: 0 })).toBe('retried');
    const [second] = await queues.claim('resend-ack', 1, { leaseMs: 30_000 });
    expect(await queues.ack(second)).toBe(true);
    expect(await queues.ack(first)).toBe(false);
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

describe('quorum mode: an acquisition sent twice to one node', () => {
  let servers: RedisServer[];
  let clients: Redis[];
  let proxy: ReplyCuttingProxy;
  let app: INestApplicationContext;
  const prefix = uniquePrefix('resend-quorum');

  beforeAll(async () => {
    servers = await Promise.all([startRedisServer(), startRedisServer(), startRedisServer()]);
    clients = servers.map((s) => redisClient(s.url));
    proxy = await startReplyCuttingProxy(servers[0].url);
    app = await createLockApp({
      keyPrefix: prefix,
      nodes: [proxy.url, servers[1].url, servers[2].url],
    });
    // Loaded first on every node (a NOSCRIPT answer would run nothing).
    await (await app.get(LockService).acquire('warm')).release();
  });
  afterAll(async () => {
    await app.close();
    await proxy.close();
    for (const c of clients) c.disconnect();
    await Promise.all(servers.map((s) => s.stop()));
  });

  it('counts the node as granting, so a failed attempt releases the lock there too', async () => {
    const k = lockRedisKeys(prefix, 'split', 'lock');
    // Another owner holds the lock on the two other nodes: the attempt gets 1 node of 3. Those
    // two answer after 500 ms, so that the first node's answer (to the second run) comes first.
    await Promise.all(clients.slice(1).map((c) => c.set(k.value, 'rival', 'PX', 60_000)));
    await Promise.all(clients.slice(1).map((c) => c.call('CLIENT', 'PAUSE', 500, 'ALL')));
    const call = `${k.value}\r\n$${k.fence.length}\r\n${k.fence}\r\n`;
    proxy.cutAfter(call);
    expect(await app.get(LockService).tryAcquire('split', { ttlMs: 60_000 })).toBeNull();
    // The acquisition twice, then the release of the failed attempt (same first keys).
    expect([proxy.cuts, proxy.seen(call)]).toEqual([1, 3]);
    // The node that ran the acquisition twice is free again, not held for the TTL.
    await waitFor(
      'the failed attempt released',
      async () => (await clients[0].exists(k.value)) === 0,
    );
  });
});
