import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { QueueService, RedisUnavailableError } from '../../lib';
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
