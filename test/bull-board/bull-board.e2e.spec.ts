import 'reflect-metadata';
import { Injectable, type INestApplication, type OnModuleInit } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { ExpressAdapter } from '@bull-board/express';
import { BullBoardModule, InjectBullBoard, type BullBoardInstance } from '@bull-board/nestjs';
import request from 'supertest';
import { QueueService, RedisLockModule, type LeasedTask } from '../../lib';
import { RedisLockQueueAdapter } from '../../lib/bull-board';
import { testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';

// The board of the setup docs/queue.md shows: @bull-board/nestjs with the Express adapter, our
// queues added to it at init. Each queue shows one scenario; 'audit' is read-only.
@Injectable()
class BoardQueues implements OnModuleInit {
  constructor(
    @InjectBullBoard() private readonly board: BullBoardInstance,
    private readonly queues: QueueService,
  ) {}

  onModuleInit() {
    for (const name of ['states', 'retry', 'pause', 'actions', 'sched']) {
      this.board.addQueue(new RedisLockQueueAdapter(this.queues, name));
    }
    this.board.addQueue(new RedisLockQueueAdapter(this.queues, 'audit', { readOnlyMode: true }));
  }
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
      jobs: { id: string; data: unknown; attempts: number; groupId?: string }[];
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
    await app.init();
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
    expect(q.statuses).toEqual(['latest', 'active', 'waiting', 'paused', 'delayed', 'failed']);
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

  it('retries a failed job through the board: it is requeued and a worker processes it', async () => {
    await killTasks(queues, 'retry', ['x1', 'x2', 'x3']);
    const done: string[] = [];
    queues.process('retry', async (task: LeasedTask) => {
      done.push(task.id);
    });

    expect((await api().put('/board/api/queues/retry/x2/retry')).status).toBe(204);
    await waitFor('x2 processed', () => done.length === 1, 10_000);
    expect(done).toEqual(['x2']);
    // Done and acked: the task is gone, so the board no longer finds it.
    expect((await api().put('/board/api/queues/retry/x2/retry')).status).toBe(404);

    const all = await api().put('/board/api/queues/retry/retry/failed');
    expect(all.status).toBe(200);
    expect(all.body).toEqual({ retried: 2, skipped: 0 });
    await waitFor('x1 and x3 processed', () => done.length === 3, 10_000);
    expect(done.sort()).toEqual(['x1', 'x2', 'x3']);
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

    const added = await api()
      .post('/board/api/queues/actions/add')
      .send({ name: 'manual', data: { sku: 'A-1' }, options: { delay: 3_600_000 } });
    expect(added.status).toBe(200);
    expect(added.body.status).toBe('delayed');
    expect(await queues.get('actions', added.body.job.id)).toMatchObject({
      state: 'delayed',
      payload: { sku: 'A-1' },
    });

    // Empty: every ready and delayed task goes; running and dead ones stay.
    expect((await api().put('/board/api/queues/actions/empty')).status).toBe(200);
    expect(await queues.stats('actions')).toEqual({
      ready: 0,
      delayed: 0,
      leased: 1,
      dead: 2,
      paused: false,
    });
  });

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
});
