import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { QueueService, RedisUnavailableError } from '../../lib';
import type { QueueStore } from '../../lib/queue/queue-store';
import { whileBusy } from '../support/busy-script';
import { createLockApp, deferred, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/**
 * A give-back Redis refuses (BUSY: another client's long script) had no effect: the task is still
 * the worker's, so its lease is renewed and its handler's outcome settled as if it had not tried.
 */
describe('QueueWorker: a give-back refused by Redis (dedicated redis-server)', () => {
  const prefix = uniquePrefix('queue-give-back-refused');
  let server: RedisServer;
  let app: INestApplicationContext;
  let queues: QueueService;

  beforeAll(async () => {
    server = await startRedisServer();
    app = await createLockApp({ redis: server.url, keyPrefix: prefix });
    queues = app.get(QueueService);
  });
  afterAll(async () => {
    await app.close();
    await server.stop();
  });

  it("task.delay() refused: delay() rejects, and the handler's result is acked (the task is not left leased to nobody)", async () => {
    const q = 'delay-refused';
    const running = deferred();
    const go = deferred();
    const end = deferred();
    let refused: unknown;
    // A lease far longer than the test: a task leased to nobody would stay leased in it.
    const worker = queues.process(
      q,
      async (task) => {
        running.resolve();
        await go.promise;
        refused = await task.delay(200).then(
          () => 'delayed',
          (err: unknown) => err,
        );
        // Returns once Redis answers again: its ack must not be refused too.
        await end.promise;
        return 'finished after the refused delay';
      },
      { leaseMs: 30_000, maxAttempts: 1 },
    );
    try {
      await queues.enqueue(q, 'd1');
      await running.promise;
      await whileBusy(server.url, async () => {
        go.resolve();
        await waitFor('the delay refused', () => refused !== undefined);
      });
      end.resolve();
    } finally {
      go.resolve();
      end.resolve();
      // Waits for the running task's handler and its settle.
      await worker.close();
    }
    expect(refused).toBeInstanceOf(RedisUnavailableError);
    expect(await queues.get(q, 'd1')).toMatchObject({
      state: 'completed',
      attempts: 1,
      result: 'finished after the refused delay',
    });
  });

  /**
   * Holds every `task.delay()` call of queue `q` unanswered for `ms`, then has a busy Redis refuse
   * it: the run timeout of that length, armed before the call, fires while the call is in flight.
   */
  const delayHeldThenRefused = (q: string, ms: number) => {
    const store: QueueStore = queues.store;
    const claim = store.claim.bind(store);
    return jest
      .spyOn(store, 'claim')
      .mockImplementation((queue, count, options, settles, ...rest) =>
        queue === q && settles?.[0]?.kind === 'release'
          ? new Promise((resolve) => setTimeout(resolve, ms)).then(() =>
              whileBusy(server.url, () => claim(queue, count, options, settles, ...rest)),
            )
          : claim(queue, count, options, settles, ...rest),
      );
  };

  it('task.delay() in flight when the run timeout fires, then refused: the task fails with its TaskTimeoutError (not left leased to nobody)', async () => {
    const q = 'delay-refused-timeout';
    const spy = delayHeldThenRefused(q, 50);
    let refused: unknown;
    const worker = queues.process(
      q,
      async (task) => {
        refused = await task.delay(200).then(
          () => 'delayed',
          (err: unknown) => err,
        );
        return 'too late: the attempt timed out';
      },
      // A lease far longer than the test: a task leased to nobody would stay leased in it.
      { timeoutMs: 50, leaseMs: 30_000, maxAttempts: 1 },
    );
    try {
      await queues.enqueue(q, 't1');
      await waitFor('the delay refused', () => refused !== undefined);
      await waitFor(
        't1 settled',
        async () => (await queues.get(q, 't1'))?.state !== 'leased',
        1_000,
      ).catch(() => undefined);
    } finally {
      await worker.close();
      spy.mockRestore();
    }
    expect(refused).toBeInstanceOf(RedisUnavailableError);
    expect(await queues.get(q, 't1')).toMatchObject({
      state: 'dead',
      attempts: 1,
      error: { name: 'TaskTimeoutError' },
    });
  });

  it('task.delay() in flight when the run timeout fires, then run by Redis: the task is delayed, its attempt not spent', async () => {
    const q = 'delay-late-timeout';
    const store: QueueStore = queues.store;
    const claim = store.claim.bind(store);
    // Answered after the run timeout (of the same length, armed before the call), not refused.
    const spy = jest
      .spyOn(store, 'claim')
      .mockImplementation((queue, count, options, settles, ...rest) =>
        queue === q && settles?.[0]?.kind === 'release'
          ? new Promise((resolve) => setTimeout(resolve, 50)).then(() =>
              claim(queue, count, options, settles, ...rest),
            )
          : claim(queue, count, options, settles, ...rest),
      );
    let delayed: unknown;
    const worker = queues.process(
      q,
      async (task) => {
        delayed = await task.delay(60_000).then(
          () => 'delayed',
          (err: unknown) => err,
        );
        return 'ignored: the task was given back';
      },
      { timeoutMs: 50, leaseMs: 30_000, maxAttempts: 1 },
    );
    try {
      await queues.enqueue(q, 'l1');
      await waitFor('the delay answered', () => delayed !== undefined);
    } finally {
      await worker.close();
      spy.mockRestore();
    }
    expect(delayed).toBe('delayed');
    expect(await queues.get(q, 'l1')).toMatchObject({ state: 'delayed', attempts: 0 });
  });

  it('a batch: task.delay() in flight when the run timeout fires, then refused: that task fails with its TaskTimeoutError', async () => {
    const q = 'delay-refused-timeout-batch';
    const spy = delayHeldThenRefused(q, 50);
    let refused: unknown;
    const worker = queues.process(
      q,
      async (tasks) => {
        refused = await tasks[0].delay(200).then(
          () => 'delayed',
          (err: unknown) => err,
        );
        return tasks.map(() => 'too late');
      },
      { batch: { size: 1, maxWaitMs: 10 }, timeoutMs: 50, leaseMs: 30_000, maxAttempts: 1 },
    );
    try {
      await queues.enqueue(q, 'b1');
      await waitFor('the delay refused', () => refused !== undefined);
      await waitFor(
        'b1 settled',
        async () => (await queues.get(q, 'b1'))?.state !== 'leased',
        1_000,
      ).catch(() => undefined);
    } finally {
      await worker.close();
      spy.mockRestore();
    }
    expect(refused).toBeInstanceOf(RedisUnavailableError);
    expect(await queues.get(q, 'b1')).toMatchObject({
      state: 'dead',
      attempts: 1,
      error: { name: 'TaskTimeoutError' },
    });
  });

  it("a shutdown give-back refused: the running handler's result is acked once it returns", async () => {
    const q = 'drain-refused';
    const running = deferred();
    const end = deferred();
    // Ignores its signal: still running when the drain gives its task back.
    const worker = queues.process(
      q,
      async () => {
        running.resolve();
        await end.promise;
        return 'finished after the refused give-back';
      },
      { leaseMs: 30_000, drainTimeoutMs: 50 },
    );
    try {
      await queues.enqueue(q, 'r1');
      await running.promise;
      await whileBusy(server.url, () => worker.close());
    } finally {
      end.resolve();
    }
    await waitFor('r1 completed', async () => (await queues.get(q, 'r1'))?.state === 'completed');
    expect(await queues.get(q, 'r1')).toMatchObject({
      attempts: 1,
      result: 'finished after the refused give-back',
    });
  });
});
