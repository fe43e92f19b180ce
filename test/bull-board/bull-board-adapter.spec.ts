import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { INestApplicationContext } from '@nestjs/common';
import {
  defineQueue,
  QueueError,
  QueueService,
  RedisLockOptionsError,
  type RunningTask,
} from '../../lib';
import { BullBoardActionError, RedisLockQueueAdapter } from '../../lib/bull-board';
import { createLockApp, deferred, uniquePrefix, waitFor } from '../support/helpers';

const root = resolve(__dirname, '../..');

/** The ids of a page of jobs, in order. */
const ids = (jobs: { toJSON(): { id?: unknown } }[]) => jobs.map((j) => String(j.toJSON().id));

/** The TypeScript files under `dir`, as paths from the repository root. */
const tsFiles = (dir: string): string[] =>
  readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(dir, f));

describe('RedisLockQueueAdapter', () => {
  let app: INestApplicationContext;
  let queues: QueueService;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: uniquePrefix('bull-board-adapter') });
    queues = app.get(QueueService);
  });
  afterAll(async () => {
    await app.close();
  });
  /** Whether `queue` has `n` completed tasks. */
  const completed = (queue: string, n: number) => async () =>
    (await queues.stats(queue)).completed === n;

  it('is named by its queue (a name or a defineQueue handle) and its prefix', () => {
    expect(new RedisLockQueueAdapter(queues, 'orders').getName()).toBe('orders');
    const typed = defineQueue<{ sku: string }>('typed');
    expect(new RedisLockQueueAdapter(queues, typed, { prefix: 'eu:' }).getName()).toBe('eu:typed');
  });

  it('is read-only unless readOnlyMode: false is given (then it offers retries)', () => {
    const unset = new RedisLockQueueAdapter(queues, 'orders');
    expect([unset.readOnlyMode, unset.allowRetries]).toEqual([true, false]);
    const opted = new RedisLockQueueAdapter(queues, 'orders', { readOnlyMode: false });
    expect([opted.readOnlyMode, opted.allowRetries]).toEqual([false, true]);
    const noRetries = new RedisLockQueueAdapter(queues, 'orders', {
      readOnlyMode: false,
      allowRetries: false,
    });
    expect([noRetries.readOnlyMode, noRetries.allowRetries]).toEqual([false, false]);
  });

  it('shows the displayName and description it is given', () => {
    const adapter = new RedisLockQueueAdapter(queues, 'orders', {
      displayName: 'Orders',
      description: 'paid orders to fulfil',
    });
    expect(adapter.getDisplayName()).toBe('Orders');
    expect(adapter.getDescription()).toBe('paid orders to fulfil');
  });

  it.each([
    [{ readOnly: true }, 'options.readOnly'],
    [{ readOnlyMode: 'yes' }, 'readOnlyMode'],
    [{ allowRetries: 1 }, 'allowRetries'],
    [{ prefix: 42 }, 'prefix'],
    [{ delimiter: null }, 'delimiter'],
    [{ displayName: 1 }, 'displayName'],
    [{ description: false }, 'description'],
    ['read-only', 'options'],
  ])('rejects the options %p naming %s', (options, option) => {
    const create = () => new RedisLockQueueAdapter(queues, 'q', options as never);
    expect(create).toThrow(RedisLockOptionsError);
    expect(create).toThrow(expect.objectContaining({ option }));
  });

  it('rejects something else than the QueueService, and a bad queue name', () => {
    const notService = () => new RedisLockQueueAdapter({} as QueueService, 'q');
    expect(notService).toThrow(expect.objectContaining({ option: 'queues' }));
    for (const name of ['', 7, undefined]) {
      const create = () => new RedisLockQueueAdapter(queues, name as never);
      expect(create).toThrow(QueueError);
      expect(create).toThrow(expect.objectContaining({ argument: 'queue' }));
    }
  });

  it('lists kept completed tasks with their result, progress, finish time and attempts', async () => {
    const adapter = new RedisLockQueueAdapter(queues, 'done');
    const worker = queues.process('done', async (task: RunningTask<{ n: number }>) => {
      await task.progress({ step: 'charged' });
      return { orderId: `ord-${task.payload.n}` };
    });
    try {
      await queues.enqueue('done', ['o1', 'o2'], { payload: { n: 1 } });
      await waitFor('o1 and o2 completed', completed('done', 2), 10_000);
    } finally {
      await worker.close();
    }
    const stored = await queues.get('done', 'o1');
    expect(await adapter.getJobCounts()).toMatchObject({ completed: 2, failed: 0, active: 0 });

    const jobs = await adapter.getJobs(['completed'], 0, 9);
    expect(ids(jobs).sort()).toEqual(['o1', 'o2']);
    const o1 = jobs.find((j) => j.toJSON().id === 'o1')!;
    expect(await o1.getState()).toBe('completed');
    expect(o1.toJSON()).toMatchObject({
      data: { n: 1 },
      returnvalue: { orderId: 'ord-1' },
      progress: { step: 'charged' },
      attemptsMade: 1,
      finishedOn: stored!.finishedAt,
      processedOn: null,
      failedReason: '',
      stacktrace: null,
    });
    expect(stored!.finishedAt).toEqual(expect.any(Number));
    // "latest" has them too, and paging the completed list cuts it where asked.
    expect(ids(await adapter.getJobs([...adapter.getJobStatuses()])).sort()).toEqual(['o1', 'o2']);
    expect([
      ...ids(await adapter.getJobs(['completed'], 0, 0)),
      ...ids(await adapter.getJobs(['completed'], 1, 1)),
    ]).toEqual(ids(jobs));

    // Retry of a completed job is refused (its id is taken while its result is kept) and the
    // board hides the button; clean of completed jobs removes those older than the grace.
    expect(adapter.allowCompletedRetries).toBe(false);
    await expect(o1.retry('completed')).rejects.toThrow(BullBoardActionError);
    await adapter.clean('completed', 60_000);
    expect((await queues.stats('done')).completed).toBe(2);
    await adapter.clean('completed', -1_000);
    expect((await queues.stats('done')).completed).toBe(0);
  });

  it("names a job by its task's name (enqueue's name), else by its id", async () => {
    const adapter = new RedisLockQueueAdapter(queues, 'named-jobs');
    await queues.enqueue('named-jobs', 'a', { name: 'welcome' });
    await queues.enqueue('named-jobs', 'b');
    const jobs = await adapter.getJobs(['waiting'], 0, 9);
    expect(jobs.map((j) => [j.toJSON().id, j.toJSON().name]).sort()).toEqual([
      ['a', 'welcome'],
      ['b', 'b'],
    ]);
  });

  it('shows the progress of a running task', async () => {
    const adapter = new RedisLockQueueAdapter(queues, 'running');
    const reported = deferred();
    const release = deferred();
    const worker = queues.process('running', async (task: RunningTask) => {
      await task.progress(40);
      reported.resolve();
      await release.promise;
      return 'ok';
    });
    try {
      await queues.enqueue('running', 'r1');
      await reported.promise;
      const [job] = await adapter.getJobs(['active']);
      expect(await job.getState()).toBe('active');
      expect(job.toJSON()).toMatchObject({ id: 'r1', progress: 40, finishedOn: null });
      expect(await adapter.getJobCounts()).toMatchObject({ active: 1, completed: 0 });
    } finally {
      release.resolve();
      await waitFor('r1 completed', completed('running', 1), 10_000);
      await worker.close();
    }
    const [done] = await adapter.getJobs(['completed']);
    expect(done.toJSON()).toMatchObject({ id: 'r1', progress: 40, returnvalue: 'ok' });
  });

  it('lists dead then cancelled tasks as failed, paging across the two', async () => {
    const adapter = new RedisLockQueueAdapter(queues, 'failing');
    const dead = ['d1', 'd2', 'd3'];
    await queues.enqueue('failing', dead, { payload: { kind: 'dead' } });
    for (const task of await queues.claim('failing', 3, { leaseMs: 60_000 })) {
      const error = new Error(`card declined (${task.id})`);
      expect(await queues.nack(task, { maxAttempts: 1, error })).toBe('dead');
    }
    await queues.enqueue('failing', ['c1', 'c2'], { payload: { kind: 'cancelled' } });
    await queues.enqueue('failing', 'c3', { payload: { kind: 'cancelled' }, delayMs: 60_000 });
    for (const id of ['c1', 'c2', 'c3']) {
      expect(await queues.cancel('failing', id, { reason: 'customer left' })).toBe('cancelled');
    }
    expect(await adapter.getJobCounts()).toMatchObject({ failed: 6, waiting: 0, delayed: 0 });

    const all = ids(await adapter.getJobs(['failed'], 0, 99));
    expect(all.slice(0, 3).sort()).toEqual(dead);
    expect(all.slice(3).sort()).toEqual(['c1', 'c2', 'c3']);
    // Every page size and start gives the slice of that one list: dead ones, then cancelled.
    for (const size of [1, 2, 4, 5]) {
      const paged: string[] = [];
      for (let start = 0; start < 8; start += size) {
        paged.push(...ids(await adapter.getJobs(['failed'], start, start + size - 1)));
      }
      expect([size, paged]).toEqual([size, all]);
    }
    expect(ids(await adapter.getJobs(['failed'], 2, 3))).toEqual(all.slice(2, 4));
    expect(ids(await adapter.getJobs(['failed'], 4, 9))).toEqual(all.slice(4));

    const byId = new Map(
      (await adapter.getJobs(['failed'], 0, 99)).map((j) => [String(j.toJSON().id), j]),
    );
    const d1 = byId.get('d1')!.toJSON();
    expect(d1).toMatchObject({ failedReason: 'card declined (d1)', attemptsMade: 1 });
    expect(d1.stacktrace).toEqual([expect.stringContaining('Error: card declined (d1)')]);
    expect(d1.finishedOn).toEqual(expect.any(Number));
    const c3 = byId.get('c3')!.toJSON();
    expect(c3).toMatchObject({
      data: { kind: 'cancelled' },
      failedReason: 'TaskCancelledError: cancelled: customer left',
      returnvalue: null,
    });
    expect(c3.finishedOn).toEqual(expect.any(Number));
    expect(await byId.get('c3')!.getState()).toBe('failed');

    // Retry: a dead task is requeued, a cancelled one enqueued again with its payload.
    await byId.get('d1')!.retry('failed');
    await byId.get('c3')!.retry('failed');
    expect(await queues.get('failing', 'd1')).toMatchObject({ state: 'ready', attempts: 0 });
    expect(await queues.get('failing', 'c3')).toMatchObject({
      state: 'ready',
      payload: { kind: 'cancelled' },
    });
    await expect(byId.get('c3')!.retry('failed')).rejects.toMatchObject({ statusCode: 409 });
    await expect(byId.get('d1')!.retry('failed')).rejects.toMatchObject({ statusCode: 409 });

    // Clean of failed jobs removes both dead and cancelled ones past the grace.
    await adapter.clean('failed', -1_000);
    expect(await queues.stats('failing')).toMatchObject({ dead: 0, cancelled: 0, ready: 2 });
  });

  it('is loaded only from its own entry point: nothing else imports it or @bull-board', () => {
    const importers = tsFiles('lib').filter((file) => {
      if (file.startsWith('lib/bull-board/')) return false;
      const source = readFileSync(join(root, file), 'utf8');
      return /from '(@bull-board\/|\.\.?\/(\.\.\/)*bull-board)/.test(source);
    });
    expect(importers).toEqual([]);
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    expect(pkg.exports['./bull-board']).toEqual({
      types: './dist/bull-board/index.d.ts',
      default: './dist/bull-board/index.js',
    });
    expect(tsFiles('lib/bull-board')).toContain('lib/bull-board/index.ts');
    expect(pkg.peerDependenciesMeta['@bull-board/api']).toEqual({ optional: true });
  });
});
