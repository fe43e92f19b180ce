import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import {
  QueueService,
  RedisLockOptionsError,
  UnrecoverableTaskError,
  type RunningTask,
} from '../../lib';
import { createLockApp, deferred, uniquePrefix, waitFor } from '../support/helpers';

describe('QueueService batch workers', () => {
  const prefix = uniquePrefix('queue-batch');
  let app: INestApplicationContext;
  let queues: QueueService;
  let n = 0;
  const fresh = () => `batch-${++n}`;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix, queue: { backoffMs: 0 } });
    queues = app.get(QueueService);
  });
  afterAll(() => app.close());

  it('10,000 tasks at size 100: one task failed per batch is retried alone, none lost, none run twice once done', async () => {
    const q = fresh();
    const ids = Array.from({ length: 10_000 }, (_, i) => `t${i}`);
    for (let i = 0; i < ids.length; i += 1_000) await queues.enqueue(q, ids.slice(i, i + 1_000));
    const completedRuns = new Map<string, number>();
    const sizes: number[] = [];
    let failedOnPurpose = 0;
    const worker = queues.process(
      q,
      async (tasks: RunningTask[]) => {
        sizes.push(tasks.length);
        // The first task of every batch fails on its first attempt; the rest complete.
        const first = tasks[0];
        if (first.attempt === 1) {
          first.fail(new Error('fails once'));
          failedOnPurpose++;
        }
        for (const t of tasks) {
          if (t !== first || t.attempt > 1) {
            completedRuns.set(t.id, (completedRuns.get(t.id) ?? 0) + 1);
          }
        }
        return tasks.map((t) => ({ id: t.id }));
      },
      { batch: { size: 100 }, maxAttempts: 3 },
    );
    await waitFor(
      'all completed',
      // keepCompleted keeps the 1,000 most recent, trimmed to 900 when past it (docs/queue.md).
      async () => (await queues.stats(q)).completed >= 900 && completedRuns.size === 10_000,
      120_000,
    );
    await worker.close();
    expect(Math.max(...sizes)).toBeLessThanOrEqual(100);
    expect(completedRuns.size).toBe(10_000);
    expect([...completedRuns.values()].every((v) => v === 1)).toBe(true);
    // Every batch failed exactly one task, and each of those ran again (alone or with others).
    const batches = sizes.length;
    expect(failedOnPurpose).toBeGreaterThanOrEqual(100);
    expect(batches).toBeGreaterThanOrEqual(100);
    const stats = await queues.stats(q);
    expect(stats).toMatchObject({ ready: 0, delayed: 0, leased: 0, dead: 0 });
    // Results are per task (the kept ones: keepCompleted's 1,000 most recent).
    const [kept] = await queues.list(q, 'completed', { limit: 1 });
    expect(kept.result).toEqual({ id: kept.id });
  }, 180_000);

  it('holds the leases of the tasks it collects: a batch that waits longer than a lease runs each task once and completes it', async () => {
    const q = fresh();
    const batches: string[][] = [];
    const worker = queues.process(
      q,
      (tasks: RunningTask[]) => void batches.push(tasks.map((t) => `${t.id}#${t.attempt}`)),
      { batch: { size: 10, maxWaitMs: 3_000 }, leaseMs: 300, maxAttempts: 3 },
    );
    try {
      await queues.enqueue(q, 'first');
      // first's lease (300 ms) would have run out twice before second arrives.
      await new Promise((r) => setTimeout(r, 800));
      await queues.enqueue(q, 'second');
      await waitFor('both completed', async () => (await queues.stats(q)).completed === 2, 10_000);
    } finally {
      await worker.close();
    }
    expect(batches).toEqual([['first#1', 'second#1']]);
    expect(await queues.stats(q)).toMatchObject({ ready: 0, leased: 0, dead: 0 });
  });

  it('waits up to maxWaitMs to fill a batch, woken by enqueues (not polling): 3 then 7 make one batch of 10', async () => {
    const q = fresh();
    const batches: string[][] = [];
    const worker = queues.process(
      q,
      (tasks: RunningTask[]) => void batches.push(tasks.map((t) => t.id)),
      { batch: { size: 10, maxWaitMs: 2_000 } },
    );
    await queues.enqueue(q, ['a', 'b', 'c']);
    await new Promise((r) => setTimeout(r, 100));
    await queues.enqueue(q, ['d', 'e', 'f', 'g', 'h', 'i', 'j']);
    await waitFor('one batch', () => batches.length >= 1, 10_000);
    expect(batches[0].sort()).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j']);
    // Fewer than size: runs once maxWaitMs passed.
    await queues.enqueue(q, ['k', 'l']);
    await waitFor('the partial batch', () => batches.length >= 2, 10_000);
    expect(batches[1].sort()).toEqual(['k', 'l']);
    await worker.close();
  });

  it('a handler that throws fails every task not failed otherwise; UnrecoverableTaskError on one sends it to the dead letters', async () => {
    const q = fresh();
    let calls = 0;
    const worker = queues.process(
      q,
      (tasks: RunningTask[]) => {
        calls++;
        const doomed = tasks.find((t) => t.id === 'doomed');
        doomed?.fail(new UnrecoverableTaskError('never'));
        if (calls === 1) throw new Error('whole batch');
      },
      { batch: { size: 5, maxWaitMs: 500 }, maxAttempts: 3 },
    );
    await queues.enqueue(q, ['a', 'b', 'doomed']);
    await waitFor('settled', async () => {
      const s = await queues.stats(q);
      return s.completed === 2 && s.dead === 1;
    });
    await worker.close();
    expect((await queues.get(q, 'doomed'))?.error?.name).toBe('UnrecoverableTaskError');
    expect((await queues.get(q, 'a'))?.attempts).toBe(2);
  });

  it('a batch past its timeoutMs fails each task with its own TaskTimeoutError', async () => {
    const q = fresh();
    const stuck = deferred();
    const worker = queues.process(q, () => stuck.promise, {
      batch: { size: 3, maxWaitMs: 500 },
      timeoutMs: 100,
      maxAttempts: 1,
    });
    try {
      await queues.enqueue(q, ['first', 'second', 'third']);
      await waitFor('dead', async () => (await queues.stats(q)).dead === 3);
      for (const id of ['first', 'second', 'third']) {
        expect((await queues.get(q, id))?.error).toMatchObject({
          name: 'TaskTimeoutError',
          message: `queue '${q}': task '${id}' ran past its timeout of 100 ms`,
        });
      }
    } finally {
      stuck.resolve();
      await worker.close();
    }
  });

  it('runs at most concurrency batches at once, however small they are', async () => {
    const q = fresh();
    const gate = deferred<void>();
    let running = 0;
    let peak = 0;
    const sizes: number[] = [];
    const worker = queues.process(
      q,
      async (tasks: RunningTask[]) => {
        sizes.push(tasks.length);
        peak = Math.max(peak, ++running);
        await gate.promise;
        running--;
      },
      { concurrency: 2, batch: { size: 10, maxWaitMs: 0 } },
    );
    try {
      // One task at a time: each makes a batch of its own while the earlier ones still run.
      for (const [i, id] of ['t0', 't1'].entries()) {
        await queues.enqueue(q, id);
        await waitFor(`${id}'s batch running`, () => running === i + 1);
      }
      await queues.enqueue(q, ['t2', 't3']);
      // Two batches run: the third waits, its tasks not even claimed.
      await new Promise((r) => setTimeout(r, 500));
      expect(sizes).toEqual([1, 1]);
      expect(await queues.stats(q)).toMatchObject({ ready: 2, leased: 2 });
      gate.resolve();
      await waitFor('all completed', async () => (await queues.stats(q)).completed === 4);
    } finally {
      gate.resolve();
      await worker.close();
    }
    expect(peak).toBe(2);
    expect(sizes).toEqual([1, 1, 2]);
  });

  it('does not run a task cancelled while its batch fills: it ends cancelled', async () => {
    const q = fresh();
    const ran: string[] = [];
    const worker = queues.process(
      q,
      (tasks: RunningTask[]) => void ran.push(...tasks.map((t) => t.id)),
      { batch: { size: 10, maxWaitMs: 2_000 } },
    );
    try {
      await queues.enqueue(q, 'doomed');
      await waitFor('held by the filling batch', async () => (await queues.stats(q)).leased === 1);
      expect(await queues.cancel(q, 'doomed', { reason: 'not needed' })).toBe('signalled');
      await waitFor(
        'settled',
        async () => (await queues.get(q, 'doomed'))?.state !== 'leased',
        10_000,
      );
      expect(await queues.get(q, 'doomed')).toMatchObject({ state: 'cancelled' });
      expect(ran).toEqual([]);
    } finally {
      await worker.close();
    }
  });

  it('rejects bad batch options with RedisLockOptionsError naming them', () => {
    for (const [batch, name] of [
      [{ size: 0 }, 'batch.size'],
      [{ size: 1_001 }, 'batch.size'],
      [{ size: 10, maxWaitMs: -1 }, 'batch.maxWaitMs'],
      [{ size: 10, other: 1 }, 'batch.other'],
    ] as const) {
      let err: unknown;
      try {
        queues.process('x', () => undefined, { batch: batch as never });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect((err as Error).message).toContain(name);
    }
  });
});
