import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import {
  QueueError,
  QueueService,
  type EnqueueOptions,
  type QueueHandler,
  type QueueWorkerHandle,
  type QueueWorkerOptions,
  type RunningTask,
} from '../../lib';
import { createLockApp, deferred, uniquePrefix, waitFor } from '../support/helpers';

describe('Step jobs: task.update() and task.progress() after task.delay(ms)', () => {
  const prefix = uniquePrefix('queue-delay-update');
  let app: INestApplicationContext;
  let queues: QueueService;
  const workers: QueueWorkerHandle[] = [];
  let n = 0;
  const fresh = () => `d${++n}`;

  /** Starts a worker that this file closes after the test. */
  const work = <P>(queue: string, handler: QueueHandler<P>, options?: QueueWorkerOptions) => {
    const worker = queues.process<P>(queue, handler, options);
    workers.push(worker);
    return worker;
  };
  const waitState = (q: string, id: string, state: string) =>
    waitFor(
      `task '${id}' ${state}`,
      async () => (await queues.get(q, id))?.state === state,
      20_000,
    );

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    queues = app.get(QueueService);
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close()));
  });
  afterAll(async () => {
    await app.close();
  });

  const kinds: [string, EnqueueOptions][] = [
    ['a plain task', {}],
    ['a task with a priority', { priority: 5 }],
    ['a grouped task', { group: 'customer-1' }],
  ];

  it.each(kinds)(
    'applies to %s while it waits; the next attempt sees the new payload',
    async (_kind, options) => {
      const q = fresh();
      const seen: string[] = [];
      const refusals: unknown[] = [];
      const waited = deferred<unknown>();
      work(q, async (task: RunningTask<{ step: string }>) => {
        seen.push(task.payload!.step);
        if (task.payload!.step !== 'reserve') return task.payload!.step;
        // Long enough that the updates land while the task waits, even on a loaded machine.
        await task.delay(1_000);
        for (const change of [
          () => task.update({ step: 'charge' }),
          () => task.progress({ reserved: true }),
        ]) {
          await change().catch((err: unknown) => refusals.push(err));
        }
        waited.resolve(await queues.get(q, 'order'));
      });
      await queues.enqueue(q, 'order', { payload: { step: 'reserve' }, ...options });

      expect(await waited.promise).toMatchObject({
        payload: { step: 'charge' },
        progress: { reserved: true },
      });
      await waitState(q, 'order', 'completed');
      expect(refusals).toEqual([]);
      expect(seen).toEqual(['reserve', 'charge']);
      // task.delay() spent no attempt: both runs were attempt 1.
      expect(await queues.get(q, 'order')).toMatchObject({ attempts: 1, result: 'charge' });
    },
  );

  it.each(kinds.slice(1))(
    'applies to %s given back due at once (task.delay(0)) while the paused queue keeps it waiting',
    async (_kind, options) => {
      const q = fresh();
      const seen: string[] = [];
      const refusals: unknown[] = [];
      const waited = deferred<unknown>();
      work(q, async (task: RunningTask<{ step: string }>) => {
        seen.push(task.payload!.step);
        if (task.payload!.step !== 'reserve') return task.payload!.step;
        await queues.pause(q);
        await task.delay(0);
        await task.update({ step: 'charge' }).catch((err: unknown) => refusals.push(err));
        waited.resolve(await queues.get(q, 'order'));
      });
      await queues.enqueue(q, 'order', { payload: { step: 'reserve' }, ...options });

      expect(await waited.promise).toMatchObject({ state: 'ready', payload: { step: 'charge' } });
      await queues.resume(q);
      await waitState(q, 'order', 'completed');
      expect(refusals).toEqual([]);
      expect(seen).toEqual(['reserve', 'charge']);
    },
  );

  it("a worker's close aborts the signal of a handler still running after task.delay(), without giving the task back twice", async () => {
    const q = fresh();
    const delayed = deferred<void>();
    const aborted = deferred<unknown>();
    const worker = queues.process(
      q,
      async (task: RunningTask, signal: AbortSignal) => {
        await task.delay(60_000);
        delayed.resolve();
        // Still running after its task went back to the queue.
        await new Promise<void>((resolve) => {
          signal.addEventListener('abort', () => {
            aborted.resolve(signal.reason);
            resolve();
          });
        });
      },
      { drainTimeoutMs: 100 },
    );
    await queues.enqueue(q, 'step');
    await delayed.promise;
    await worker.close();
    expect(await aborted.promise).toBeInstanceOf(QueueError);
    // Given back once, by task.delay: still delayed by its minute, its attempt counted once.
    expect(await queues.get(q, 'step')).toMatchObject({ state: 'delayed' });
  });

  it('is refused for a grouped task once it was claimed again, and once it finished', async () => {
    const q = fresh();
    const secondRun = deferred();
    const finish = deferred();
    const refusals = deferred<unknown[]>();
    let runs = 0;
    work(
      q,
      async (task: RunningTask<{ step: string }>) => {
        if (++runs > 1) {
          secondRun.resolve();
          await finish.promise;
          return 'second run';
        }
        // Due at once: claimed again (by this worker's second slot) before the update.
        await task.delay(0);
        await secondRun.promise;
        const whileClaimed = await task.update({ step: 'never' }).catch((err: unknown) => err);
        finish.resolve();
        await waitState(q, 'late', 'completed');
        const afterFinish = await task.progress('never').catch((err: unknown) => err);
        refusals.resolve([whileClaimed, afterFinish]);
      },
      { concurrency: 2 },
    );
    await queues.enqueue(q, 'late', { payload: { step: 'first' }, group: 'customer-1' });

    const [whileClaimed, afterFinish] = await refusals.promise;
    expect(whileClaimed).toBeInstanceOf(QueueError);
    expect((whileClaimed as Error).message).toBe(
      `queue '${q}': task 'late' was given back with task.delay() and has been claimed or has ` +
        'finished since; change its payload before task.delay(), or delay it longer',
    );
    expect(afterFinish).toBeInstanceOf(QueueError);
    expect((afterFinish as Error).message).toContain('change its progress before task.delay()');
    expect(await queues.get(q, 'late')).toMatchObject({
      state: 'completed',
      payload: { step: 'first' },
      result: 'second run',
    });
  });
});
