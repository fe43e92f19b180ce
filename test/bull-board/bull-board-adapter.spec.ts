import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { INestApplicationContext } from '@nestjs/common';
import {
  defineQueue,
  QueueError,
  QueueService,
  RedisLockOptionsError,
  RedisUnavailableError,
  type RunningTask,
} from '../../lib';
import { BullBoardActionError, RedisLockQueueAdapter } from '../../lib/bull-board';
import { createLockApp, deferred, sleep, uniquePrefix, waitFor } from '../support/helpers';

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

  it('shows the newest finished tasks in "latest", not the oldest', async () => {
    const adapter = new RedisLockQueueAdapter(queues, 'latest');
    const all = [...adapter.getJobStatuses()];
    // 30 tasks completed one after the other (c0 first), each at its own millisecond.
    for (let i = 0; i < 30; i++) {
      await queues.enqueue('latest', `c${i}`);
      const [task] = await queues.claim('latest', 1, { leaseMs: 60_000 });
      await sleep(3);
      expect(await queues.ack(task)).toBe(true);
    }
    const newest = (from: number, to: number) =>
      Array.from({ length: from - to + 1 }, (_, i) => `c${from - i}`);
    // bull-board's "latest" tab: getJobs(every status, 0, jobsPerPage - 1).
    expect(ids(await adapter.getJobs(all, 0, 9))).toEqual(newest(29, 20));
    expect(ids(await adapter.getJobs(all, 10, 19))).toEqual(newest(19, 10));
    expect(ids(await adapter.getJobs(all, 25, 34))).toEqual(newest(4, 0));
    // A task cancelled after them is newer still; the completed tab stays oldest first.
    await sleep(3);
    await queues.enqueue('latest', 'x1', { delayMs: 60_000 });
    expect(await queues.cancel('latest', 'x1')).toBe('cancelled');
    expect(ids(await adapter.getJobs(all, 0, 9))).toEqual(['x1', ...newest(29, 21)]);
    expect(ids(await adapter.getJobs(['completed'], 0, 2))).toEqual(['c0', 'c1', 'c2']);
  });

  it('retries a cancelled named task with its name, so the handler of that name runs it', async () => {
    const adapter = new RedisLockQueueAdapter(queues, 'mail', { readOnlyMode: false });
    await queues.enqueue('mail', 'm1', {
      name: 'welcome',
      payload: { to: 'a@b' },
      delayMs: 60_000,
    });
    expect(await queues.cancel('mail', 'm1')).toBe('cancelled');
    await (await adapter.getJob('m1'))!.retry('failed');
    expect(await queues.get('mail', 'm1')).toMatchObject({
      state: 'ready',
      name: 'welcome',
      payload: { to: 'a@b' },
    });
    const ran: string[] = [];
    const worker = queues.process(
      'mail',
      async (task: RunningTask) => {
        ran.push(`${task.name}:${task.id}`);
      },
      { name: 'welcome' },
    );
    try {
      await waitFor('m1 completed', completed('mail', 1), 10_000);
    } finally {
      await worker.close();
    }
    expect(ran).toEqual(['welcome:m1']);
  });

  it('adds a job with its name, priority, attempts, delay, lifo and group; refuses other options', async () => {
    const adapter = new RedisLockQueueAdapter(queues, 'added', { readOnlyMode: false });
    const named = await adapter.addJob('welcome', { to: 'a@b' }, { priority: 5 } as never);
    expect(named.toJSON()).toMatchObject({ name: 'welcome', priority: 5, opts: { priority: 5 } });
    expect(await queues.get('added', String(named.toJSON().id))).toMatchObject({
      state: 'ready',
      name: 'welcome',
      priority: 5,
      payload: { to: 'a@b' },
    });
    // An empty name, or bull-board's placeholder for it, adds a task without a name.
    for (const name of ['', '__default__']) {
      const job = await adapter.addJob(name, { n: 1 }, { delay: 60_000 });
      const task = await queues.get('added', String(job.toJSON().id));
      expect([name, task?.state, task?.name]).toEqual([name, 'delayed', undefined]);
    }
    const grouped = await adapter.addJob('', null, { group: { id: 'cust-7' } } as never);
    expect((await queues.get('added', String(grouped.toJSON().id)))?.group).toBe('cust-7');
    const lifo = await adapter.addJob('', 'first', { lifo: true } as never);
    const [next] = await queues.list('added', 'ready', { offset: 0, limit: 10 });
    expect(next.id).toBe(lifo.toJSON().id);

    // `attempts` is the task's maxAttempts: it wins over the worker's.
    const failing = new RedisLockQueueAdapter(queues, 'added-once', { readOnlyMode: false });
    const onceId = String((await failing.addJob('', 'boom', { attempts: 1 })).toJSON().id);
    const worker = queues.process(
      'added-once',
      async () => {
        throw new Error('boom');
      },
      { maxAttempts: 5, backoffMs: 0 },
    );
    try {
      await waitFor(
        'the task dead',
        async () => (await queues.stats('added-once')).dead === 1,
        10_000,
      );
    } finally {
      await worker.close();
    }
    expect(await queues.get('added-once', onceId)).toMatchObject({ state: 'dead', attempts: 1 });

    // Options the queue has no counterpart for are refused, and nothing is added.
    const before = await queues.stats('added');
    for (const options of [{ jobId: 'mine' }, { removeOnComplete: true }, { group: 'g' }]) {
      await expect(adapter.addJob('x', {}, options as never)).rejects.toMatchObject({
        name: 'BullBoardActionError',
        statusCode: 400,
      });
    }
    await expect(adapter.addJob('x', {}, { priority: 5000 } as never)).rejects.toMatchObject({
      statusCode: 400,
      argument: 'priority',
    });
    expect(await queues.stats('added')).toEqual(before);
  });

  it("serves a job's logs: the lines its handler logged", async () => {
    const adapter = new RedisLockQueueAdapter(queues, 'logged');
    const worker = queues.process('logged', async (task: RunningTask) => {
      await task.log('step 1 done');
      await task.log('step 2 done');
    });
    try {
      await queues.enqueue('logged', 'L1');
      await waitFor('L1 completed', completed('logged', 1), 10_000);
    } finally {
      await worker.close();
    }
    expect(await adapter.getJobLogs('L1')).toEqual(['step 1 done', 'step 2 done']);
    expect(await adapter.getJobLogs('unknown')).toEqual([]);
    expect(await adapter.getJobLogs('x'.repeat(600))).toEqual([]);
  });

  it('cleans waiting, paused and prioritized as ready tasks; refuses statuses it has not', async () => {
    const adapter = new RedisLockQueueAdapter(queues, 'to-clean', { readOnlyMode: false });
    const ready = async () =>
      (await queues.list('to-clean', 'ready', { offset: 0, limit: 100 })).map((t) => t.id).sort();
    await queues.enqueue('to-clean', ['w1', 'w2']);
    await queues.enqueue('to-clean', 'p1', { priority: 3 });
    await adapter.clean('prioritized' as never, -1_000);
    expect(await ready()).toEqual(['w1', 'w2']);
    await adapter.clean('waiting' as never, -1_000);
    expect(await ready()).toEqual([]);
    await queues.enqueue('to-clean', 'w3');
    await adapter.clean('paused' as never, 60_000); // younger than the grace: kept
    expect(await ready()).toEqual(['w3']);
    await adapter.clean('paused' as never, -1_000);
    expect(await ready()).toEqual([]);
    for (const status of ['latest', 'bogus', 'ready']) {
      await expect(adapter.clean(status as never, 0)).rejects.toMatchObject({
        name: 'BullBoardActionError',
        statusCode: 400,
      });
    }
    await expect(adapter.clean('active', 0)).rejects.toMatchObject({ statusCode: 409 });
  });

  it('refuses "Update Data" with 405 and leaves the payload as it was (not a silent 200)', async () => {
    const adapter = new RedisLockQueueAdapter(queues, 'to-update', { readOnlyMode: false });
    await queues.enqueue('to-update', 'o1', { payload: { amount: 5 }, delayMs: 3_600_000 });
    // bull-board's own handler: it answers 200 without a word when the job has no update method.
    const { updateJobDataHandler } = await import('@bull-board/api/dist/handlers/updateJobData.js');
    const req = {
      params: { queueName: adapter.getName(), jobId: 'o1' },
      queues: new Map([[adapter.getName(), adapter]]),
      body: { jobData: { amount: 500 } },
    };
    const refused = await updateJobDataHandler(req as never).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(BullBoardActionError);
    expect(refused).toMatchObject({ statusCode: 405 });
    expect((refused as Error).message).toMatch(/^bull-board action 'update data' is not available/);
    expect(await queues.get('to-update', 'o1')).toMatchObject({
      state: 'delayed',
      payload: { amount: 5 },
    });
  });

  it("empties the ready tasks and keeps the delayed ones, as BullMQ's drain()", async () => {
    const adapter = new RedisLockQueueAdapter(queues, 'to-empty', { readOnlyMode: false });
    await queues.enqueue('to-empty', ['r1', 'r2']);
    await queues.enqueue('to-empty', 'p1', { priority: 3 });
    await queues.enqueue('to-empty', 'tomorrow', { delayMs: 86_400_000 });
    await adapter.empty();
    expect(await queues.stats('to-empty')).toMatchObject({ ready: 0, delayed: 1 });
    expect(await queues.get('to-empty', 'tomorrow')).toMatchObject({ state: 'delayed' });
  });

  it('answers bad board input with 400, an impossible id as unknown, a page past the end empty', async () => {
    const adapter = new RedisLockQueueAdapter(queues, 'hostile', { readOnlyMode: false });
    await queues.enqueue('hostile', ['a', 'b', 'c']);
    await queues.schedule('hostile', 'nightly', { everyMs: 3_600_000 });
    const refused = (argument: string) =>
      expect.objectContaining({ name: 'BullBoardActionError', statusCode: 400, argument });

    expect(await adapter.getJobs(['waiting'], 1e20, 1e20 + 9)).toEqual([]);
    expect(await adapter.getJobs(['waiting'], 3, 12)).toEqual([]);
    expect(await adapter.getJobs([...adapter.getJobStatuses()], 1e20, 1e20 + 9)).toEqual([]);
    await expect(adapter.getJobs(['waiting'], -5, 4)).rejects.toEqual(refused('offset'));
    await expect(adapter.getJobs(['waiting'], 0.5, 4)).rejects.toEqual(refused('offset'));
    expect(await adapter.getJob('x'.repeat(600))).toBeUndefined();
    expect(await adapter.getJob('')).toBeUndefined();
    await expect(adapter.addJob('n', {}, { delay: -5 })).rejects.toEqual(refused('delayMs'));
    await expect(adapter.addJob('n\0', {}, {})).rejects.toEqual(refused('name'));
    await expect(adapter.setGlobalConcurrency(0)).rejects.toEqual(refused('n'));
    await expect(adapter.setGlobalConcurrency(1e9)).rejects.toEqual(refused('n'));
    expect(await adapter.removeJobScheduler('x'.repeat(600))).toBe(false);
    expect((await queues.schedules('hostile')).map((s) => s.id)).toEqual(['nightly']);
    expect(await queues.stats('hostile')).toMatchObject({ ready: 3, delayed: 0 });
    // The 400 carries the queue's own error.
    const error = await adapter.addJob('n', {}, { delay: -5 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BullBoardActionError);
    expect((error as Error).message).toMatch(
      /^bull-board action 'add' was refused: invalid argument 'delayMs'/,
    );
    expect((error as Error).cause).toBeInstanceOf(QueueError);
  });

  it('passes Redis unavailability on as it is: only argument errors become a 400', async () => {
    const unavailable = new RedisUnavailableError('queue list', 'Connection is closed.');
    expect(BullBoardActionError.fromQueueError('list', unavailable)).toBe(unavailable);
    const full = new QueueError("queue 'q' is full");
    expect(BullBoardActionError.fromQueueError('add', full)).toBe(full);
    // Through the adapter: a service whose connection is closed.
    const other = await createLockApp({ keyPrefix: uniquePrefix('bull-board-closed') });
    const adapter = new RedisLockQueueAdapter(other.get(QueueService), 'gone');
    await other.close();
    const error = await adapter.getJobs(['waiting']).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect((error as { statusCode?: number }).statusCode).toBeUndefined();
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
