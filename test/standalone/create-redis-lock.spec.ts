import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  createRedisLock,
  FencedStore,
  LockService,
  QueueService,
  QueueWorker,
  RedisLockOptionsError,
  SemaphoreService,
  type LeasedTask,
  type RedisLock,
} from '../../lib';
import { createLockApp, sleep, testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';
import { freePort, startRedisServer } from '../support/redis-server';
import { queueRedisKeys } from '../../lib/queue/queue-keys';

/** Sockets this process has open (ioredis connections among them). */
const sockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;

describe('createRedisLock: the library without Nest', () => {
  const prefix = uniquePrefix('standalone');

  it('gives the services of RedisLockModule.forRoot: locks, queues with workers, semaphores, fenced writes, events', async () => {
    const lib = await createRedisLock({ redis: testRedisUrl(), keyPrefix: prefix });
    try {
      expect(lib.locks).toBeInstanceOf(LockService);
      expect(lib.queues).toBeInstanceOf(QueueService);
      expect(lib.semaphores).toBeInstanceOf(SemaphoreService);
      expect(lib.fenced).toBeInstanceOf(FencedStore);

      const lock = await lib.locks.acquire('order:1');
      expect(await lib.locks.tryAcquire('order:1')).toBeNull();
      expect(await lib.fenced.write('stock', lock, 'one')).toBe(true);
      await lock.release();
      expect(await lib.locks.isLocked('order:1')).toBe(false);

      const permit = await lib.semaphores.acquire('api', { limit: 1 });
      expect(await lib.semaphores.tryAcquire('api', { limit: 1 })).toBeNull();
      await permit.release();

      const completed: string[] = [];
      lib.events.on('task.completed', ({ id }) => void completed.push(id));
      lib.queues.process('jobs', async (task: LeasedTask<{ n: number }>) => task.payload!.n * 2);
      await lib.queues.enqueue('jobs', 'a', { payload: { n: 21 } });
      expect(await lib.queues.waitFor('jobs', 'a', { timeoutMs: 10_000 })).toMatchObject({
        state: 'completed',
        result: 42,
      });
      await waitFor('the completed event', () => completed.includes('a'));
    } finally {
      await lib.close();
    }
  });

  it('rejects a bad option with the RedisLockOptionsError forRoot gives', async () => {
    const options = { redis: testRedisUrl(), keyPrefix: prefix, ttlMs: -5 };
    const standalone = await createRedisLock(options).catch((err: unknown) => err);
    const nest = await createLockApp(options).catch((err: unknown) => err);
    expect(standalone).toBeInstanceOf(RedisLockOptionsError);
    expect((standalone as Error).message).toBe((nest as Error).message);
    expect((standalone as Error).message).toContain('ttlMs');
  });

  it("takes forRoot's options object as it is: isGlobal is accepted and means nothing", async () => {
    const options = { redis: testRedisUrl(), keyPrefix: prefix, isGlobal: true };
    const lib = await createRedisLock(options);
    try {
      expect(await lib.locks.withLock('global', async () => 'ran')).toBe('ran');
    } finally {
      await lib.close();
    }
  });

  it('starts at once while Redis is out of reach (no connectTimeoutMs), and closes', async () => {
    const redis = `redis://127.0.0.1:${await freePort()}`;
    const lib = createRedisLock({ redis, keyPrefix: prefix, commandTimeoutMs: 20_000 });
    // It waited for the queue schedules' first read: commandTimeoutMs (20 s here).
    const first = await Promise.race([
      lib.then(() => 'started'),
      sleep(5_000).then(() => 'waiting'),
    ]);
    expect(first).toBe('started');
    await (await lib).close();
  });

  it('close() releases what it holds, stops its workers, closes its connections (not a client passed in), once', async () => {
    const before = sockets();
    const lib = await createRedisLock({ redis: testRedisUrl(), keyPrefix: prefix });
    await lib.locks.acquire('held', { ttlMs: 60_000 });
    await lib.semaphores.acquire('slots', { limit: 2, ttlMs: 60_000 });
    let running = 0;
    lib.queues.process('slow', async () => {
      running++;
      await new Promise((r) => setTimeout(r, 200));
      running--;
    });
    await lib.queues.enqueue('slow', 'x');
    await waitFor('the task to start', () => running === 1);

    const closing = lib.close();
    expect(lib.close()).toBe(closing);
    await closing;
    expect(running).toBe(0); // the running task finished before close() resolved
    const other = await createRedisLock({ redis: testRedisUrl(), keyPrefix: prefix });
    try {
      expect(await other.locks.isLocked('held')).toBe(false);
      expect(await other.queues.stats('slow')).toMatchObject({ ready: 0, leased: 0 });
    } finally {
      await other.close();
    }
    await waitFor('its sockets to close', () => sockets() <= before, 5_000, 20);

    const own = new Redis(testRedisUrl());
    const borrowed = await createRedisLock({ redis: own, keyPrefix: prefix });
    await borrowed.close();
    expect(await own.ping()).toBe('PONG');
    own.disconnect();
  });

  it('close() answers the calls made before it, even scripts Redis did not know yet', async () => {
    // A server of its own: SCRIPT FLUSH would change other files' command counts.
    const server = await startRedisServer();
    const redis = new Redis(server.url);
    try {
      for (let round = 0; round < 3; round++) {
        await redis.script('FLUSH');
        const lib = await createRedisLock({ redis: server.url, keyPrefix: `${prefix}r${round}:` });
        const calls = [
          ...[1, 2, 3].map((i) => lib.queues.enqueue('merged', `m${i}`, { payload: i })),
          lib.queues.enqueue('alone', 'p1', { priority: 2 }),
          lib.queues.stats('merged'),
          lib.rateLimiter.consume('api', { limit: 5, windowMs: 1_000 }),
        ];
        const closed = lib.close();
        const outcomes = await Promise.allSettled(calls);
        await closed;
        expect(outcomes.map((o) => (o.status === 'rejected' ? String(o.reason) : 'ok'))).toEqual(
          new Array(6).fill('ok'),
        );
        expect(await redis.zcard(queueRedisKeys(`${prefix}r${round}:`, 'merged').due)).toBe(3);
      }
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });

  it('feeds a Nest app: a plain-Node producer enqueues, the Nest worker runs it, the producer reads the result', async () => {
    @Injectable()
    class Receipts {
      @QueueWorker('receipts')
      async send(task: LeasedTask<{ amount: number }>) {
        return `receipt for ${task.id}: ${task.payload!.amount}`;
      }
    }
    const app = await createLockApp({ keyPrefix: prefix }, [Receipts]);
    let producer: RedisLock | undefined;
    try {
      producer = await createRedisLock({ redis: testRedisUrl(), keyPrefix: prefix });
      await producer.queues.enqueue('receipts', 'order-42', { payload: { amount: 5 } });
      expect(
        await producer.queues.waitFor('receipts', 'order-42', { timeoutMs: 10_000 }),
      ).toMatchObject({
        state: 'completed',
        result: 'receipt for order-42: 5',
      });
    } finally {
      await producer?.close();
      await app.close();
    }
  });
});
