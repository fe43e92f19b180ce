import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import {
  LockService,
  OnQueueEvent,
  QueueError,
  QueueService,
  QueueWorker,
  SemaphoreService,
  createRedisLock,
  type LeasedTask,
  type QueueEvent,
  type RedisLock,
} from '../../lib';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import { createLockApp, deferred, testRedisUrl, uniquePrefix } from '../support/helpers';

const prefix = uniquePrefix('queue-shutdown-order');

/** The handler's gates: it says when it started, and waits until the test lets it go on. */
let started = deferred();
let goOn = deferred();
let outcome: string[] = [];

/**
 * Holds a lock when the shutdown begins, then takes another lock and a permit, as a draining
 * handler would.
 */
async function lockedWork(
  task: LeasedTask,
  locks: LockService,
  semaphores: SemaphoreService,
): Promise<string> {
  try {
    const done = await locks.withLock(`order:${task.id}`, async (held) => {
      started.resolve();
      await goOn.promise;
      const inner = await locks.withLock(`stock:${task.id}`, () =>
        semaphores.withPermit('pool', () => 'done', { limit: 2 }),
      );
      return held.signal.aborted ? 'held lock lost' : inner;
    });
    outcome.push(done);
    return done;
  } catch (err) {
    outcome.push(`${(err as Error).name}: ${(err as Error).message}`);
    throw err;
  }
}

@Injectable()
class OrderWorker {
  constructor(
    private readonly locks: LockService,
    private readonly semaphores: SemaphoreService,
  ) {}

  @QueueWorker('orders', { maxAttempts: 1, drainTimeoutMs: 10_000 })
  handle(task: LeasedTask) {
    return lockedWork(task, this.locks, this.semaphores);
  }
}

@Injectable()
class JobsWithEvents {
  @QueueWorker('jobs')
  handle() {
    return 'ran';
  }

  @OnQueueEvent('jobs', 'completed')
  onDone(_event: QueueEvent) {}
}

/** Resolves after the current macrotask: whatever the shutdown does at once has been done. */
const nextMacrotask = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('shutdown order: queue workers drain before locks and semaphores refuse', () => {
  let outside: RedisLock;

  beforeAll(async () => {
    outside = await createRedisLock({ redis: testRedisUrl(), keyPrefix: prefix });
  });
  afterAll(() => outside.close());
  beforeEach(() => {
    started = deferred();
    goOn = deferred();
    outcome = [];
  });

  it('app.close(): a draining @QueueWorker handler still takes a lock and a permit, and its task completes', async () => {
    const app = await createLockApp({ keyPrefix: prefix }, [OrderWorker]);
    const locks = app.get(LockService);
    const shutdownBegan = deferred();
    const hook = locks.beforeApplicationShutdown.bind(locks);
    jest.spyOn(locks, 'beforeApplicationShutdown').mockImplementation(() => {
      shutdownBegan.resolve();
      return hook();
    });
    await app.get(QueueService).enqueue('orders', 'o1');
    await started.promise;
    const closing = app.close();
    await shutdownBegan.promise;
    await nextMacrotask();
    goOn.resolve();
    await closing;

    expect(outcome).toEqual(['done']);
    expect(await outside.queues.stats('orders')).toMatchObject({
      completed: 1,
      dead: 0,
      ready: 0,
    });
    // Released by the handler (or the shutdown after the drain), never left behind.
    expect(await outside.locks.isLocked('order:o1')).toBe(false);
  });

  it('createRedisLock close(): a draining worker still takes a lock and a permit', async () => {
    const redisLock = await createRedisLock({ redis: testRedisUrl(), keyPrefix: prefix });
    redisLock.queues.process(
      'standalone',
      (task) => lockedWork(task, redisLock.locks, redisLock.semaphores),
      { maxAttempts: 1, drainTimeoutMs: 10_000 },
    );
    await redisLock.queues.enqueue('standalone', 's1');
    await started.promise;
    const closing = redisLock.close();
    await nextMacrotask();
    goOn.resolve();
    await closing;

    expect(outcome).toEqual(['done']);
    expect(await outside.queues.stats('standalone')).toMatchObject({ completed: 1, dead: 0 });
  });

  it('a start that fails on @OnQueueEvent with eventsMaxLen: 0 starts no worker and closes its connections', async () => {
    await outside.queues.enqueue('jobs', 'j1');
    const process = jest.spyOn(QueueService.prototype, 'process');
    const close = jest.spyOn(RedisLockConnection.prototype, 'close');
    try {
      await expect(
        createLockApp({ keyPrefix: prefix, queue: { eventsMaxLen: 0 } }, [JobsWithEvents]),
      ).rejects.toThrow(QueueError);
      expect(process).not.toHaveBeenCalled();
      expect(close).toHaveBeenCalledTimes(1);
      expect((close.mock.contexts[0] as RedisLockConnection).closed).toBe(true);
      expect(await outside.queues.stats('jobs')).toMatchObject({ ready: 1, leased: 0 });
    } finally {
      // On the code before the fix: stop what the failed start left running.
      await Promise.allSettled(process.mock.results.map((r) => r.value.close()));
      process.mockRestore();
      close.mockRestore();
    }
  });
});
