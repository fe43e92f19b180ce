import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  createRedisLock,
  LockService,
  QueueService,
  RedisCommandError,
  RedisLockEvents,
  RedisLockOptionsError,
  RedisUnavailableError,
  SemaphoreService,
  type RunningTask,
} from '../../lib';
import { toRedisError } from '../../lib/redis/bounded';
import { createLockApp, uniquePrefix } from '../support/helpers';
import { whileBusy } from '../support/busy-script';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/**
 * ioredis options of a user's client that its copies (a worker's BLPOP connection, the events
 * reader's XREAD connection, the connection of replica-confirmed writes) must not inherit as
 * they are: each of these broke `waitFor`, `events()` or the idle worker's wake-up.
 */
describe("a user's client options and the module's own connections", () => {
  let server: RedisServer;
  let app: INestApplicationContext | undefined;
  let client: Redis | undefined;

  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    client?.disconnect();
    client = undefined;
  });
  afterAll(async () => {
    await server.stop();
  });

  /** Worker errors of `app` (`worker.error` events), from now on. */
  function workerErrors(context: INestApplicationContext): string[] {
    const errors: string[] = [];
    context
      .get(RedisLockEvents)
      .on('worker.error', ({ operation, error }) =>
        errors.push(`${operation}: ${(error as Error).message}`),
      );
    return errors;
  }

  /** A worker that returns its payload doubled; `waitFor` and an `events()` subscriber of it. */
  async function roundTrip(context: INestApplicationContext, queue: string) {
    const queues = context.get(QueueService);
    const errors = workerErrors(context);
    const worker = queues.process(queue, async (task: RunningTask<number>) => task.payload * 2);
    const completed: string[] = [];
    const subscription = queues
      .events(queue)
      .subscribe((e) => e.type === 'completed' && completed.push(e.taskId!));
    // The reader's first read is in flight: an event after it is delivered.
    await new Promise((r) => setTimeout(r, 100));
    await queues.enqueue(queue, 't1', { payload: 21 });
    const outcome = await queues.waitFor(queue, 't1', { timeoutMs: 3_000 });
    const seen = Date.now() + 2_000;
    while (!completed.includes('t1') && Date.now() < seen) {
      await new Promise((r) => setTimeout(r, 5));
    }
    subscription.unsubscribe();
    await worker.close();
    return { outcome, completed, errors };
  }

  const done = { outcome: { state: 'completed', result: 42 }, completed: ['t1'], errors: [] };

  it('enableOfflineQueue: false — waitFor resolves, events() delivers, the worker blocks instead of failing', async () => {
    client = new Redis(server.url, { enableOfflineQueue: false });
    await new Promise((resolve) => client!.once('ready', resolve));
    app = await createLockApp({ redis: client, keyPrefix: uniquePrefix('no-offline') });
    expect(await roundTrip(app, 'q')).toEqual(done);
  });

  it('a client switched with SELECT: the module works in that database on every connection', async () => {
    client = new Redis(server.url);
    await client.select(3);
    const prefix = uniquePrefix('selected');
    app = await createLockApp({ redis: client, keyPrefix: prefix });
    expect(await roundTrip(app, 'q')).toEqual(done);
    const db0 = new Redis(server.url);
    try {
      expect(await db0.keys(`${prefix}*`)).toEqual([]);
    } finally {
      db0.disconnect();
    }
  });

  it("ioredis commandTimeout on the client: blocking reads are not cut short by it, and it reads as 'unavailable'", async () => {
    client = new Redis(server.url, { commandTimeout: 200 });
    app = await createLockApp({ redis: client, keyPrefix: uniquePrefix('cmd-timeout') });
    const errors = workerErrors(app);
    const worker = app.get(QueueService).process('idle', async () => undefined);
    // Idle: its BLPOP blocks for seconds, longer than the client's commandTimeout.
    await new Promise((r) => setTimeout(r, 700));
    await worker.close();
    expect(errors).toEqual([]);
    expect(toRedisError('queue enqueue', new Error('Command timed out'))).toBeInstanceOf(
      RedisUnavailableError,
    );
  });

  it("BUSY (another client's script past busy-reply-threshold) is RedisUnavailableError; calls work again after SCRIPT KILL", async () => {
    app = await createLockApp({ redis: server.url, keyPrefix: uniquePrefix('busy') });
    const locks = app.get(LockService);
    const semaphores = app.get(SemaphoreService);
    const held = await locks.acquire('held');
    // Before: RedisCommandError (a 500 through LockInterceptor instead of a 503).
    const refused = await whileBusy(server.url, () =>
      Promise.allSettled([
        locks.tryAcquire('k'),
        locks.isLocked('k'),
        held.extend(),
        semaphores.tryAcquire('s', { limit: 1 }),
      ]),
    );
    expect(refused.map((r) => r.status === 'rejected' && r.reason.name)).toEqual(
      Array(4).fill('RedisUnavailableError'),
    );
    expect(await locks.isLocked('held')).toBe(true);
    expect(await held.release()).toBe(true);
    // Only BUSY itself: BUSYGROUP (XGROUP CREATE of a group that exists) is an answer.
    expect(
      toRedisError('queue', new Error('BUSYGROUP Consumer Group name already exists')),
    ).toBeInstanceOf(RedisCommandError);
  });

  it('connectTimeoutMs with enableOfflineQueue: false starts when Redis is up', async () => {
    const started = await createRedisLock({
      redis: { host: '127.0.0.1', port: server.port, enableOfflineQueue: false },
      connectTimeoutMs: 2_000,
      keyPrefix: uniquePrefix('connect'),
    });
    try {
      expect(await started.locks.isLocked('x')).toBe(false);
    } finally {
      await started.close();
    }
  });

  it('a client in subscriber mode, or already quit, is refused at start with RedisLockOptionsError (each call failed after a start that said nothing)', async () => {
    const refusal = async (redis: Redis) => {
      const err = await createRedisLock({ redis, keyPrefix: uniquePrefix('state') }).then(
        async (started) => {
          await started.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      return { option: (err as RedisLockOptionsError).option, message: (err as Error).message };
    };
    client = new Redis(server.url);
    await client.subscribe('anything');
    expect(await refusal(client)).toEqual({
      option: 'redis',
      message: expect.stringContaining("got 'a client in subscriber mode'") as string,
    });
    client.disconnect();
    client = new Redis(server.url);
    await client.ping();
    const ended = new Promise((resolve) => client!.once('end', resolve));
    await client.quit();
    await ended;
    expect(await refusal(client)).toEqual({
      option: 'redis',
      message: expect.stringContaining("got 'a client closed (ioredis status 'end')'") as string,
    });
    // A client that has not connected yet (lazyConnect) is fine: its first command connects it.
    const lazy = new Redis(server.url, { lazyConnect: true });
    const started = await createRedisLock({ redis: lazy, keyPrefix: uniquePrefix('lazy') });
    try {
      expect(await started.locks.isLocked('x')).toBe(false);
    } finally {
      await started.close();
      lazy.disconnect();
    }
  });
});
