import 'reflect-metadata';
import { Injectable, type INestApplication, type OnModuleInit } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { ExpressAdapter } from '@bull-board/express';
import { BullBoardModule, InjectBullBoard, type BullBoardInstance } from '@bull-board/nestjs';
import type { Browser } from 'playwright-core';
import request from 'supertest';
import { QueueService, RedisLockModule, type LeasedTask, type RunningTask } from '../../lib';
import { RedisLockQueueAdapter } from '../../lib/bull-board';
import { chromiumPath, launchChromium } from '../support/chromium';
import {
  deferred,
  queueStats,
  sleep,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';

const executablePath = chromiumPath();
if (!executablePath) {
  console.warn(
    'SKIPPED: the bull-board page test needs Chromium, which could not be found or installed ' +
      '(scripts/ensure-chromium.sh; set CHROMIUM_BIN to use another binary)',
  );
}
/** Generous: a loaded 2-core machine runs browsers, Nest apps and child processes at once. */
const UI_MS = 30_000;

// The board of the setup docs/queue.md shows: @bull-board/nestjs with the Express adapter, our
// queues added to it at init. Each queue shows one scenario; 'audit' is read-only.
@Injectable()
class BoardQueues implements OnModuleInit {
  constructor(
    @InjectBullBoard() private readonly board: BullBoardInstance,
    private readonly queues: QueueService,
  ) {}

  onModuleInit() {
    for (const name of [
      'states',
      'retry',
      'pause',
      'actions',
      'sched',
      'outcomes',
      'page',
      'parents',
      'history',
      'newest',
      'hostile',
      'named',
    ]) {
      this.board.addQueue(new RedisLockQueueAdapter(this.queues, name, { readOnlyMode: false }));
    }
    this.board.addQueue(new RedisLockQueueAdapter(this.queues, 'audit', { readOnlyMode: true }));
    // No options: read-only by default, as the app has not opted in to actions.
    this.board.addQueue(new RedisLockQueueAdapter(this.queues, 'unset'));
  }
}

/** An order task of the 'outcomes' and 'page' queues. */
interface Order {
  n: number;
  /** Throw: with `maxAttempts: 1` the task dies. */
  fail?: boolean;
  /** Wait for the test's `release` before completing. */
  hold?: boolean;
}

/** Moves `ids` of `queue` to the dead-letter set: enqueued, claimed, failed on their last attempt. */
async function killTasks(queues: QueueService, queue: string, ids: string[]) {
  await queues.enqueue(queue, ids, { payload: { kind: 'dead' } });
  const claimed = await queues.claim(queue, ids.length, { leaseMs: 60_000 });
  expect(claimed.map((t) => t.id).sort()).toEqual([...ids].sort());
  for (const task of claimed) expect(await queues.nack(task, { maxAttempts: 1 })).toBe('dead');
}

describe('RedisLockQueueAdapter in bull-board (@bull-board/nestjs, Express)', () => {
  let app: INestApplication;
  let queues: QueueService;
  const api = () => request(app.getHttpServer());
  const board = async (queue: string, status = 'latest') => {
    const res = await api()
      .get('/board/api/queues')
      .query({ activeQueue: queue, status, page: 1, jobsPerPage: 50 });
    expect(res.status).toBe(200);
    const found = res.body.queues.find((q: { name: string }) => q.name === queue);
    expect(found).toBeDefined();
    return found as {
      counts: Record<string, number>;
      jobs: {
        id: string;
        data: unknown;
        attempts: number;
        groupId?: string;
        returnValue?: unknown;
        progress?: unknown;
        failedReason?: string;
      }[];
      isPaused: boolean;
      statuses: string[];
      readOnlyMode: boolean;
    };
  };

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: uniquePrefix('bull-board') }),
        BullBoardModule.forRoot({
          route: '/board',
          adapter: ExpressAdapter,
          boardOptions: { uiConfig: { hideRedisDetails: true } },
        }),
      ],
      providers: [BoardQueues],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    // Listening (not only init) so that a browser can open the board.
    await app.listen(0, '127.0.0.1');
    queues = app.get(QueueService);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('shows ready, delayed, leased and dead tasks as waiting, delayed, active and failed', async () => {
    await killTasks(queues, 'states', ['d1', 'd2']);
    await queues.enqueue('states', 'l1', { payload: { kind: 'leased' } });
    expect(await queues.claim('states', 1, { leaseMs: 60_000 })).toHaveLength(1);
    await queues.enqueue('states', ['r1', 'r2'], { payload: { kind: 'ready' } });
    await queues.enqueue('states', 'r3', { payload: { kind: 'ready' }, group: 'cust-7' });
    await queues.enqueue('states', ['w1', 'w2'], {
      delayMs: 3_600_000,
      payload: { kind: 'later' },
    });

    const q = await board('states');
    expect(q.statuses).toEqual([
      'latest',
      'active',
      'waiting',
      'waiting-children',
      'paused',
      'delayed',
      'completed',
      'failed',
    ]);
    expect(q.counts).toEqual({
      active: 1,
      waiting: 3,
      paused: 0,
      delayed: 2,
      failed: 2,
      completed: 0,
      prioritized: 0,
      'waiting-children': 0,
    });
    // "latest": every task, most recently enqueued first.
    expect(q.jobs.map((j) => j.id).sort()).toEqual([
      'd1',
      'd2',
      'l1',
      'r1',
      'r2',
      'r3',
      'w1',
      'w2',
    ]);
    // bull-board asks for one page of "latest"; a caller paging through it directly (start > 0)
    // gets pages of the merged list that neither repeat nor skip a task.
    const adapter = new RedisLockQueueAdapter(queues, 'states');
    const statuses = ['active', 'waiting', 'delayed', 'failed'] as const;
    const paged: string[] = [];
    for (const start of [0, 3, 6]) {
      paged.push(
        ...(await adapter.getJobs([...statuses], start, start + 2)).map((j) =>
          String(j.toJSON().id),
        ),
      );
    }
    expect(paged.sort()).toEqual(q.jobs.map((j) => j.id).sort());
    expect(q.isPaused).toBe(false);

    const byStatus = async (status: string) => (await board('states', status)).jobs;
    const waiting = await byStatus('waiting');
    expect(waiting.map((j) => [j.id, j.groupId])).toEqual([
      ['r1', undefined],
      ['r2', undefined],
      ['r3', 'cust-7'],
    ]);
    expect((await byStatus('delayed')).map((j) => j.id).sort()).toEqual(['w1', 'w2']);
    expect((await byStatus('active')).map((j) => j.id)).toEqual(['l1']);
    const failed = await byStatus('failed');
    expect(failed.map((j) => [j.id, j.attempts, j.data])).toEqual([
      ['d1', 1, { kind: 'dead' }],
      ['d2', 1, { kind: 'dead' }],
    ]);

    const one = await api().get('/board/api/queues/states/d1');
    expect(one.status).toBe(200);
    expect(one.body.status).toBe('failed');
    expect(one.body.job).toMatchObject({ id: 'd1', data: { kind: 'dead' }, attempts: 1 });
    expect((await api().get('/board/api/queues/states/nope')).status).toBe(404);
  });

  it('shows flow parents waiting for their children under waiting-children', async () => {
    await queues.enqueueFlow({
      queue: 'parents',
      id: 'order-1',
      payload: { kind: 'parent' },
      children: [
        { queue: 'parents-kids', id: 'charge' },
        { queue: 'parents-kids', id: 'reserve' },
      ],
    });
    const q = await board('parents');
    expect(q.counts).toMatchObject({ 'waiting-children': 1, waiting: 0 });
    const parents = (await board('parents', 'waiting-children')).jobs;
    expect(parents.map((j) => [j.id, j.data])).toEqual([['order-1', { kind: 'parent' }]]);
    const one = await api().get('/board/api/queues/parents/order-1');
    expect([one.status, one.body.status]).toEqual([200, 'waiting-children']);
  });

  it('retries a failed job through the board: it is requeued and a worker processes it', async () => {
    await killTasks(queues, 'retry', ['x1', 'x2', 'x3']);
    const done: string[] = [];
    queues.process('retry', async (task: LeasedTask) => {
      done.push(task.id);
    });

    expect((await api().put('/board/api/queues/retry/x2/retry')).status).toBe(204);
    await waitFor('x2 processed', () => done.length === 1, 10_000);
    expect(done).toEqual(['x2']);
    // Completed and kept: the board shows it completed, and does not run it again.
    await waitFor('x2 completed', async () => (await board('retry')).counts.completed === 1);
    expect((await api().get('/board/api/queues/retry/x2')).body.status).toBe('completed');
    const again = await api().put('/board/api/queues/retry/x2/retry');
    expect(again.status).toBe(405);
    expect(again.body.message).toMatch(/^bull-board action 'retry' is not available/);

    const all = await api().put('/board/api/queues/retry/retry/failed');
    expect(all.status).toBe(200);
    expect(all.body).toEqual({ retried: 2, skipped: 0 });
    await waitFor('x1 and x3 processed', () => done.length === 3, 10_000);
    expect(done.sort()).toEqual(['x1', 'x2', 'x3']);
    await waitFor('3 completed', async () => (await board('retry')).counts.completed === 3);
    expect((await board('retry')).counts).toMatchObject({ failed: 0, waiting: 0, active: 0 });
  });

  it('pauses and resumes the queue through the board', async () => {
    const done: string[] = [];
    queues.process('pause', async (task: LeasedTask) => {
      done.push(task.id);
    });

    expect((await api().put('/board/api/queues/pause/pause')).status).toBe(200);
    expect((await queues.stats('pause')).paused).toBe(true);
    await queues.enqueue('pause', ['p1', 'p2']);
    const paused = await board('pause', 'paused');
    expect(paused.isPaused).toBe(true);
    expect(paused.counts).toMatchObject({ waiting: 0, paused: 2, active: 0 });
    expect(paused.jobs.map((j) => j.id)).toEqual(['p1', 'p2']);
    expect(done).toEqual([]);

    expect((await api().put('/board/api/queues/pause/resume')).status).toBe(200);
    await waitFor('p1 and p2 processed', () => done.length === 2, 10_000);
    expect(done.sort()).toEqual(['p1', 'p2']);
    expect((await board('pause')).isPaused).toBe(false);
  });

  it('removes, cleans and adds jobs; refuses what it cannot do with 405 or 409', async () => {
    await killTasks(queues, 'actions', ['f1', 'f2']);
    await queues.enqueue('actions', 'run', { payload: { kind: 'leased' } });
    expect(await queues.claim('actions', 1, { leaseMs: 60_000 })).toHaveLength(1);
    await queues.enqueue('actions', ['a1', 'a2']);
    await queues.enqueue('actions', 'later', { delayMs: 3_600_000 });

    expect((await api().put('/board/api/queues/actions/a1/clean')).status).toBe(204);
    expect(await queues.get('actions', 'a1')).toBeUndefined();
    const running = await api().put('/board/api/queues/actions/run/clean');
    expect(running.status).toBe(409);
    expect(running.body.error).toEqual({ key: 'ERRORS.JOB_IS_ACTIVE' });
    expect((await queues.get('actions', 'run'))?.state).toBe('leased');

    // Clean of failed jobs with bull-board's 5 s grace keeps the ones that just died.
    expect((await api().put('/board/api/queues/actions/clean/failed')).status).toBe(200);
    expect((await queues.stats('actions')).dead).toBe(2);
    expect((await api().put('/board/api/queues/actions/clean/active')).status).toBe(409);

    for (const path of ['actions/later/promote', 'actions/promote']) {
      const refused = await api().put(`/board/api/queues/${path}`);
      expect([path, refused.status]).toEqual([path, 405]);
      expect(refused.body.message).toMatch(/^bull-board action 'promote' is not available/);
    }
    const update = await api()
      .patch('/board/api/queues/actions/later/update-data')
      .send({ jobData: { changed: true } });
    expect([update.status, update.body.message]).toEqual([
      405,
      expect.stringMatching(/^bull-board action 'update data' is not available/),
    ]);
    expect((await queues.get('actions', 'later'))?.payload).toBeUndefined();

    const added = await api()
      .post('/board/api/queues/actions/add')
      .send({ name: 'manual', data: { sku: 'A-1' }, options: { delay: 3_600_000 } });
    expect(added.status).toBe(200);
    expect(added.body.status).toBe('delayed');
    expect(await queues.get('actions', added.body.job.id)).toMatchObject({
      state: 'delayed',
      payload: { sku: 'A-1' },
    });

    // Empty: every ready task goes; delayed, running and dead ones stay (as BullMQ's drain()).
    expect((await api().put('/board/api/queues/actions/empty')).status).toBe(200);
    expect(await queues.stats('actions')).toEqual({
      ...queueStats({ leased: 1, dead: 2, delayed: 2 }),
      completed: 0,
      cancelled: 0,
      expired: 0,
    });
  });

  it('shows completed tasks with result and progress, running ones with progress, and cancelled ones as failed', async () => {
    const holding = deferred();
    const release = deferred();
    const worker = queues.process('outcomes', async (task: RunningTask<Order>) => {
      await task.progress({ step: `charged ${task.payload.n}` });
      if (task.payload.fail) throw new Error(`card declined (${task.id})`);
      if (task.payload.hold) {
        holding.resolve();
        await release.promise;
      }
      return { orderId: `ord-${task.payload.n}` };
    });
    const counts = async () => (await board('outcomes')).counts;
    try {
      await queues.enqueue('outcomes', 'o1', { payload: { n: 1 } });
      await queues.enqueue('outcomes', 'o2', { payload: { n: 2, fail: true }, maxAttempts: 1 });
      await queues.enqueue('outcomes', 'c1', { payload: { n: 3 }, delayMs: 3_600_000 });
      expect(await queues.cancel('outcomes', 'c1', { reason: 'customer left' })).toBe('cancelled');
      await waitFor(
        'o1 completed and o2 dead',
        async () => (await counts()).completed === 1 && (await counts()).failed === 2,
        10_000,
      );
      await queues.enqueue('outcomes', 'h1', { payload: { n: 4, hold: true } });
      await holding.promise;

      expect(await counts()).toMatchObject({
        active: 1,
        waiting: 0,
        delayed: 0,
        completed: 1,
        failed: 2,
      });
      const [o1] = (await board('outcomes', 'completed')).jobs;
      expect(o1).toMatchObject({
        id: 'o1',
        data: { n: 1 },
        returnValue: { orderId: 'ord-1' },
        progress: { step: 'charged 1' },
        attempts: 1,
        finishedOn: expect.any(Number),
        isFailed: false,
      });
      const one = await api().get('/board/api/queues/outcomes/o1');
      expect(one.body).toMatchObject({
        status: 'completed',
        job: { returnValue: { orderId: 'ord-1' } },
      });
      // The job page also asks for the job's flow: there is none.
      const flow = await api().get('/board/api/queues/outcomes/o1/flow');
      expect([flow.status, flow.body]).toEqual([
        200,
        { nodeId: 'o1', flowRoot: null, isFlowNode: false },
      ]);

      // Failed: the dead task, then the cancelled one, each with its error.
      const failed = (await board('outcomes', 'failed')).jobs;
      expect(failed.map((j) => j.id)).toEqual(['o2', 'c1']);
      expect(failed[0]).toMatchObject({
        failedReason: 'card declined (o2)',
        stacktrace: [expect.stringContaining('Error: card declined (o2)')],
        isFailed: true,
      });
      expect(failed[1]).toMatchObject({
        data: { n: 3 },
        failedReason: 'TaskCancelledError: cancelled: customer left',
        isFailed: true,
      });
      const [h1] = (await board('outcomes', 'active')).jobs;
      expect(h1).toMatchObject({ id: 'h1', progress: { step: 'charged 4' } });

      // Retrying the cancelled task through the board runs it.
      expect((await api().put('/board/api/queues/outcomes/c1/retry')).status).toBe(204);
      release.resolve();
      await waitFor(
        'o1, h1 and c1 completed',
        async () => (await counts()).completed === 3,
        10_000,
      );
      const results = (await board('outcomes', 'completed')).jobs.map((j) => [j.id, j.returnValue]);
      expect(results.sort()).toEqual([
        ['c1', { orderId: 'ord-3' }],
        ['h1', { orderId: 'ord-4' }],
        ['o1', { orderId: 'ord-1' }],
      ]);
      expect(await counts()).toMatchObject({ active: 0, failed: 1 });
    } finally {
      release.resolve();
      await worker.close();
    }
  });

  it('shows the newest tasks on the latest tab, not the oldest', async () => {
    for (let i = 0; i < 30; i++) {
      await queues.enqueue('newest', `c${i}`);
      const [task] = await queues.claim('newest', 1, { leaseMs: 60_000 });
      await sleep(3);
      expect(await queues.ack(task)).toBe(true);
    }
    const page = async (n: number) => {
      const res = await api()
        .get('/board/api/queues')
        .query({ activeQueue: 'newest', status: 'latest', page: n, jobsPerPage: 10 });
      expect(res.status).toBe(200);
      const q = res.body.queues.find((x: { name: string }) => x.name === 'newest');
      return q.jobs.map((j: { id: string }) => j.id);
    };
    const newest = (from: number) => Array.from({ length: 10 }, (_, i) => `c${from - i}`);
    expect(await page(1)).toEqual(newest(29));
    // bull-board shows "latest" as one page (it asks for jobs 0..jobsPerPage-1 whatever the page).
    expect(await page(2)).toEqual(newest(29));
  });

  it("adds named jobs, retries a named task with its name, and serves a task's logs", async () => {
    const ran: string[] = [];
    const worker = queues.process(
      'named',
      async (task: RunningTask) => {
        await task.log(`ran ${task.id}`);
        ran.push(`${task.name}:${task.id}`);
      },
      { name: 'welcome' },
    );
    try {
      const added = await api()
        .post('/board/api/queues/named/add')
        .send({ name: 'welcome', data: { to: 'a@b' }, options: { priority: 5 } });
      expect(added.status).toBe(200);
      expect(added.body.job).toMatchObject({ name: 'welcome', opts: { priority: 5 } });
      const id = String(added.body.job.id);
      await waitFor('the added job ran', () => ran.length === 1, 10_000);
      expect(ran).toEqual([`welcome:${id}`]);
      await waitFor('logged', async () => (await queues.logs('named', id)).length === 1);
      const logs = await api().get(`/board/api/queues/named/${id}/logs`);
      expect([logs.status, logs.body]).toEqual([200, [`ran ${id}`]]);

      await queues.enqueue('named', 'm1', { name: 'welcome', delayMs: 60_000 });
      expect(await queues.cancel('named', 'm1')).toBe('cancelled');
      expect((await api().put('/board/api/queues/named/m1/retry')).status).toBe(204);
      await waitFor('m1 ran', () => ran.length === 2, 10_000);
      expect(ran[1]).toBe('welcome:m1');
      await waitFor(
        'm1 completed',
        async () => (await queues.get('named', 'm1'))?.state === 'completed',
      );
    } finally {
      await worker.close();
    }
  });

  it('answers bad input from the board with 400 or 404, not 500; cleans waiting and paused', async () => {
    await queues.enqueue('hostile', ['a', 'b', 'c']);
    const long = 'x'.repeat(600);
    const expectRefused = (res: { status: number; body: { message?: string } }, what: RegExp) => {
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(what);
    };
    for (const status of ['waiting', 'paused', 'prioritized', 'wait']) {
      const res = await api().put(`/board/api/queues/hostile/clean/${status}`);
      expect([status, res.status]).toEqual([status, 200]);
    }
    // bull-board's grace (5 s) keeps the tasks just added.
    expect((await queues.stats('hostile')).ready).toBe(3);
    for (const status of ['latest', 'bogus']) {
      expectRefused(
        await api().put(`/board/api/queues/hostile/clean/${status}`),
        /^bull-board action 'clean' was refused: unknown status/,
      );
    }
    for (const page of ['99999999999999999999', '1e300', '2']) {
      const res = await api()
        .get('/board/api/queues')
        .query({ activeQueue: 'hostile', status: 'waiting', page, jobsPerPage: 10 });
      expect([page, res.status]).toEqual([page, 200]);
      const q = res.body.queues.find((x: { name: string }) => x.name === 'hostile');
      expect([page, q.jobs]).toEqual([page, []]);
    }
    expect((await api().get(`/board/api/queues/hostile/${long}`)).status).toBe(404);
    expect((await api().put(`/board/api/queues/hostile/${long}/retry`)).status).toBe(404);
    expect((await api().put(`/board/api/queues/hostile/${long}/clean`)).status).toBe(404);
    const logs = await api().get(`/board/api/queues/hostile/${long}/logs`);
    expect([logs.status, logs.body]).toEqual([200, []]);
    const add = (options: Record<string, unknown>, name = 'n') =>
      api().post('/board/api/queues/hostile/add').send({ name, data: {}, options });
    expectRefused(await add({ delay: -5 }), /invalid argument 'delayMs'/);
    expectRefused(await add({ delay: 'soon' }), /invalid argument 'delayMs'/);
    expectRefused(await add({ jobId: 'mine', attempts: 3 }), /'options.jobId'/);
    expectRefused(await add({}, 'a\u0000b'), /invalid argument 'name'/);
    const concurrency = (n: number) =>
      api().put('/board/api/queues/hostile/concurrency').send({ concurrency: n });
    expectRefused(await concurrency(0), /invalid argument 'n'/);
    expectRefused(await concurrency(1e9), /invalid argument 'n'/);
    const scheduler = await api().put(`/board/api/queues/hostile/job-schedulers/${long}/remove`);
    expect(scheduler.status).toBe(404);
    expect(await queues.stats('hostile')).toMatchObject({ ready: 3, delayed: 0 });
  });

  (executablePath ? it : it.skip)(
    "shows a completed task's result and a cancelled task's reason in the page (Chromium)",
    async () => {
      const worker = queues.process('page', async (task: RunningTask<Order>) => ({
        orderId: `ord-page-${task.payload.n}`,
      }));
      try {
        await queues.enqueue('page', 'p7', { payload: { n: 7 } });
        await waitFor(
          'p7 completed',
          async () => (await queues.stats('page')).completed === 1,
          10_000,
        );
      } finally {
        await worker.close();
      }
      await queues.enqueue('page', 'p8', { payload: { n: 8 }, delayMs: 3_600_000 });
      await queues.cancel('page', 'p8', { reason: 'out of stock' });

      const browser: Browser = await launchChromium(executablePath!);
      try {
        const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
        page.setDefaultTimeout(UI_MS);
        const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
        const errors: string[] = [];
        page.on('response', (res) => {
          if (res.status() >= 500) errors.push(`${res.status()} ${res.url()}`);
        });
        // The completed tab: the job's card opens on its data, the payload and the result.
        expect((await page.goto(`${base}/board/queue/page?status=completed`))?.status()).toBe(200);
        await page.getByText('"ord-page-7"').waitFor();
        expect(await page.getByText('returnValue').count()).toBe(1);
        // The failed tab: the cancelled task's card opens on its error, the cancel's reason.
        await page.goto(`${base}/board/queue/page?status=failed`);
        await page.getByText('TaskCancelledError: cancelled: out of stock').waitFor();
        // The job's own page (which also asks bull-board's flow view about it).
        await page.goto(`${base}/board/queue/page/p7`);
        await page.getByText('"ord-page-7"').waitFor();
        await page.waitForLoadState('networkidle');
        expect(await page.getByText('Internal server error').count()).toBe(0);
        expect(errors).toEqual([]);
      } finally {
        await browser.close();
      }
    },
    60_000,
  );

  it('lists and removes job schedulers, and sets the global concurrency', async () => {
    await queues.schedule('sched', 'nightly', { everyMs: 3_600_000, payload: { report: 'sales' } });
    const listed = await api().get('/board/api/job-schedulers').query({ queueName: 'sched' });
    expect(listed.status).toBe(200);
    expect(listed.body.schedulers).toEqual([
      expect.objectContaining({
        id: 'nightly',
        queueName: 'sched',
        every: 3_600_000,
        template: { data: { report: 'sales' } },
      }),
    ]);
    const remove = (id: string) => api().put(`/board/api/queues/sched/job-schedulers/${id}/remove`);
    expect((await remove('nightly')).status).toBe(204);
    expect(await queues.schedules('sched')).toEqual([]);
    expect((await remove('nightly')).status).toBe(404);

    // A global concurrency of 1 set on the board: a claim of 3 gets one task.
    await queues.enqueue('sched', ['c1', 'c2', 'c3']);
    const set = await api().put('/board/api/queues/sched/concurrency').send({ concurrency: 1 });
    expect(set.status).toBe(200);
    expect(await queues.claim('sched', 3, { leaseMs: 60_000 })).toHaveLength(1);
    // Redis details are hidden as docs/bull-board.md advises (the adapter has no INFO).
    expect((await api().get('/board/api/redis/stats')).status).toBe(403);
  });

  it('passes readOnlyMode to bull-board, which then refuses every action', async () => {
    await killTasks(queues, 'audit', ['z1']);
    const q = await board('audit');
    expect(q.readOnlyMode).toBe(true);
    expect(q.counts.failed).toBe(1);
    expect((await api().put('/board/api/queues/audit/z1/retry')).status).toBe(405);
    expect((await api().put('/board/api/queues/audit/pause')).status).toBe(405);
    expect(await queues.stats('audit')).toMatchObject({ dead: 1, paused: false });
  });

  it('is read-only unless the app opts in: bull-board refuses add, retry, clean, empty and pause with 405', async () => {
    await killTasks(queues, 'unset', ['u1']);
    await queues.enqueue('unset', 'u2');
    const q = await board('unset');
    expect(q.readOnlyMode).toBe(true);
    expect(q.counts).toMatchObject({ failed: 1, waiting: 1 });
    const refused: Array<[string, Promise<{ status: number }>]> = [
      [
        'add',
        api()
          .post('/board/api/queues/unset/add')
          .send({ name: 'x', data: { evil: 1 } }),
      ],
      ['retry', api().put('/board/api/queues/unset/u1/retry')],
      ['clean job', api().put('/board/api/queues/unset/u2/clean')],
      ['clean failed', api().put('/board/api/queues/unset/clean/failed')],
      ['pause', api().put('/board/api/queues/unset/pause')],
      ['empty', api().put('/board/api/queues/unset/empty')],
    ];
    for (const [action, res] of refused) {
      expect([action, (await res).status]).toEqual([action, 405]);
    }
    expect(await queues.stats('unset')).toMatchObject({ dead: 1, ready: 1, paused: false });
    expect(
      (await queues.list('unset', 'ready', { offset: 0, limit: 10 })).map((t) => t.id),
    ).toEqual(['u2']);
  });

  it("serves the metrics action from the queue's history: completed, and failed as dead + cancelled + expired", async () => {
    await killTasks(queues, 'history', ['h-dead-1', 'h-dead-2']);
    await queues.enqueue('history', ['h1', 'h2', 'h3']);
    const ran = await queues.claim('history', 3, { leaseMs: 60_000 });
    for (const task of ran) expect(await queues.ack(task)).toBe(true);
    await queues.enqueue('history', 'h-cancel', { delayMs: 60_000 });
    expect(await queues.cancel('history', 'h-cancel')).toBe('cancelled');
    // What an instance writes once a minute, written now.
    await queues.store.metrics.flush(true);

    const res = await api().get('/board/api/queues/history/metrics');
    expect(res.status).toBe(200);
    const sum = (data: number[]) => data.reduce((a, b) => a + b, 0);
    expect(sum(res.body.completed.data)).toBe(3);
    expect(res.body.completed.meta.count).toBe(3);
    expect(sum(res.body.failed.data)).toBe(3);
    // Newest first: the counts are in the current minute or the one before.
    expect(sum(res.body.completed.data.slice(0, 2))).toBe(3);
  });
});
