import 'reflect-metadata';
import { Agent } from 'node:http';
import { Logger } from '@nestjs/common';
import request from 'supertest';
import { QueueService } from '../../lib';
import { SampleRedis } from '../../sample/redis/sample-redis';
import type { DeskStatus, DeskTask, NextTaskResult } from '../../sample/task-desk/task-desk.dto';
import { queueStats, testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';
import { startReplyCuttingProxy } from '../support/reply-cutting-proxy';
import { sendJson, startSample, type RunningSample } from './support/sample-app';

/** Short enough to watch a lease run out in a test, long enough for one edit on a busy machine. */
const LEASE_MS = 1_000;

describe('sample: task desk on two app instances sharing one Redis', () => {
  let a: RunningSample;
  let b: RunningSample;
  let agent: Agent;

  beforeEach(async () => {
    const keyPrefix = uniquePrefix('sample-desk');
    [a, b] = await Promise.all([
      startSample({ keyPrefix, deskLeaseMs: LEASE_MS }),
      startSample({ keyPrefix, deskLeaseMs: LEASE_MS }),
    ]);
    agent = new Agent({ keepAlive: true, maxSockets: 10 });
  });

  afterEach(async () => {
    agent.destroy();
    await Promise.all([a.app.close(), b.app.close()]);
  });

  const next = (app: RunningSample, editor: string) =>
    sendJson<NextTaskResult>(agent, 'POST', `${app.url}/editors/${editor}/next`);
  const submit = (app: RunningSample, editor: string) =>
    sendJson(agent, 'POST', `${app.url}/editors/${editor}/submit`);
  const desk = async () => (await request(a.url).get('/tasks').expect(200)).body as DeskStatus;

  it('three editors, ten tasks: one editor per task at a time, a lapsed lease goes to another editor, every task submitted exactly once', async () => {
    const ids = Array.from({ length: 10 }, (_, i) => `article-${String(i + 1).padStart(2, '0')}`);
    await request(a.url).post('/tasks').send({ ids }).expect(201, { added: 10, ids });

    /** Every task handed out, by task id: who got it and the lease's span (Redis clock). */
    const claims = new Map<string, { editor: string; task: DeskTask }[]>();
    const record = (editor: string, task: DeskTask) =>
      claims.set(task.id, [...(claims.get(task.id) ?? []), { editor, task }]);

    // Cleo takes a task and never submits it; she can't take a second one meanwhile.
    const cleo = await next(a, 'cleo');
    expect(cleo.status).toBe(200);
    const abandoned = cleo.body.task!;
    expect(abandoned).toMatchObject({ id: 'article-01', attempt: 1 });
    record('cleo', abandoned);
    const busy = await next(b, 'cleo');
    expect(busy.status).toBe(409);
    expect(busy.body).toMatchObject({ editor: 'cleo', taskId: 'article-01' });

    // Ann (on instance a) and Ben (on instance b) work until every task is submitted.
    const submittedBy = new Map<string, string[]>();
    const work = async (app: RunningSample, editor: string) => {
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline) {
        const status = await desk();
        const live = status.holders.filter((h) => h.leaseExpiresInMs > 0).map((h) => h.taskId);
        expect(new Set(live).size).toBe(live.length); // no task held by two editors
        if (Object.keys(status.submitted).length === ids.length) return;
        const answer = await next(app, editor);
        expect(answer.status).toBe(200);
        const task = answer.body.task;
        if (!task) {
          await new Promise((r) => setTimeout(r, 20)); // pool empty: cleo's task isn't back yet
          continue;
        }
        record(editor, task);
        const done = await submit(app, editor);
        if (done.status === 410) continue; // this machine was too slow for the lease: it's back in the pool
        expect(done.status).toBe(200);
        expect(done.body).toEqual({ editor, taskId: task.id, attempt: task.attempt });
        submittedBy.set(task.id, [...(submittedBy.get(task.id) ?? []), editor]);
      }
      throw new Error(`${editor} did not see every task submitted within 20 s`);
    };
    await Promise.all([work(a, 'ann'), work(b, 'ben')]);

    // Cleo's lease ran out and her task went to Ann or Ben; her late submit is refused.
    const late = await submit(b, 'cleo');
    expect(late.status).toBe(410);
    expect(late.body).toMatchObject({ editor: 'cleo', taskId: 'article-01' });
    const retaken = claims.get('article-01')!;
    expect(retaken[0]).toMatchObject({ editor: 'cleo' });
    expect(retaken.length).toBeGreaterThanOrEqual(2);
    expect(['ann', 'ben']).toContain(retaken[1].editor);
    expect(retaken[1].task.attempt).toBe(2);

    // No two leases of one task overlapped in time (Redis clock).
    const overlaps: string[] = [];
    for (const [id, list] of claims) {
      const spans = list.map((c) => c.task).sort((x, y) => x.claimedAt - y.claimedAt);
      for (let i = 1; i < spans.length; i++) {
        if (spans[i].claimedAt < spans[i - 1].leaseExpiresAt) {
          overlaps.push(
            `${id}: claimed at ${spans[i].claimedAt}, before ${spans[i - 1].leaseExpiresAt}`,
          );
        }
      }
    }
    expect(overlaps).toEqual([]);

    // Every task submitted exactly once, by whoever held its live lease.
    expect([...submittedBy.keys()].sort()).toEqual(ids);
    for (const editors of submittedBy.values()) expect(editors).toHaveLength(1);
    const final = await desk();
    expect(Object.keys(final.submitted).sort()).toEqual(ids);
    for (const id of ids) {
      expect(final.submitted[id]).toEqual({ by: submittedBy.get(id)![0], times: 1 });
    }
    expect(final.pool).toMatchObject(queueStats());
  });

  it('gives an editor who asks twice at once, on both instances, one task (409 for the other call)', async () => {
    await request(b.url)
      .post('/tasks')
      .send({ ids: ['story-1', 'story-2'] })
      .expect(201);
    const answers = await Promise.all([next(a, 'dora'), next(b, 'dora')]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 409]);
    const status = await desk();
    expect(status.pool).toMatchObject({ ready: 1, leased: 1 });
    expect(status.holders).toEqual([
      {
        editor: 'dora',
        taskId: 'story-1',
        attempt: 1,
        leaseExpiresInMs: expect.any(Number) as number,
      },
    ]);
  });

  it('answers task null when the pool is empty, 409 for a submit without a task, 400 for bad ids', async () => {
    const empty = await next(a, 'eve');
    expect(empty).toMatchObject({ status: 200, body: { editor: 'eve', task: null } });
    const nothing = await submit(b, 'eve');
    expect(nothing.status).toBe(409);
    expect(nothing.body.message).toBe(
      "editor 'eve' holds no task; ask for one with POST /editors/eve/next",
    );

    const bad = await Promise.all([
      request(a.url).post('/tasks').send({ ids: [] }),
      request(a.url)
        .post('/tasks')
        .send({ ids: ['ok', ''] }),
      request(a.url).post('/tasks').send({ id: 'x' }),
      request(a.url).post('/editors/bad%20name/next'),
    ]);
    expect(bad.map((r) => r.status)).toEqual([400, 400, 400, 400]);
    expect(bad[1].body.message).toBe(
      `ids[1] must be an id of 1 to 64 letters, digits, ".", "_", ":" or "-" that starts with a letter or digit, got ''`,
    );
    expect((await desk()).pool).toMatchObject(queueStats());
  });

  it('puts a task whose lease ran out back in the pool for anyone, its first holder included', async () => {
    await request(a.url)
      .post('/tasks')
      .send({ ids: ['memo'] })
      .expect(201);
    const first = await next(a, 'finn');
    expect(first.body.task).toMatchObject({ id: 'memo', attempt: 1 });
    await waitFor(
      'the lease on memo to run out',
      async () => (await desk()).holders.every((h) => h.leaseExpiresInMs <= 0),
      10_000,
      50,
    );
    const again = await next(b, 'finn');
    expect(again.status).toBe(200);
    expect(again.body.task).toMatchObject({ id: 'memo', attempt: 2 });
    expect((await submit(a, 'finn')).status).toBe(200);
  });

  it('counts a submit once when ioredis sends its write again after losing the reply (a failover)', async () => {
    await request(a.url)
      .post('/tasks')
      .send({ ids: ['memo'] })
      .expect(201);
    // Instance c reaches Redis through a proxy that loses the reply to the submit's write and
    // closes the connection: Redis ran it, and ioredis sends it again on the new connection (as
    // after a master killed once its replica had the write: the promoted replica runs it twice).
    const proxy = await startReplyCuttingProxy(testRedisUrl());
    const c = await startSample({
      keyPrefix: a.app.get(SampleRedis).prefix,
      deskLeaseMs: 10_000,
      redisUrl: proxy.url,
    });
    // The write's record of the submitted task, by dora (RESP bulk strings).
    const write = 'memo\r\n$4\r\ndora\r\n';
    try {
      const taken = await next(c, 'dora');
      expect(taken.body.task).toMatchObject({ id: 'memo', attempt: 1 });
      proxy.cutAfter(write);
      const done = await submit(c, 'dora');
      expect(done).toMatchObject({ status: 200, body: { editor: 'dora', taskId: 'memo' } });
      expect([proxy.cuts, proxy.seen(write)]).toEqual([1, 2]);
    } finally {
      await c.app.close();
      await proxy.close();
    }
    const after = await desk();
    expect(after.submitted).toEqual({ memo: { by: 'dora', times: 1 } });
    expect(after.holders).toEqual([]);
    expect(after.pool).toMatchObject(queueStats());
  });
});

describe('sample: task desk when the queue fails to ack a submit', () => {
  let app: RunningSample;
  let agent: Agent;

  beforeEach(async () => {
    // A lease long enough that it can't run out during the test, even on a busy machine.
    app = await startSample({ keyPrefix: uniquePrefix('sample-desk-ack'), deskLeaseMs: 30_000 });
    agent = new Agent({ keepAlive: true, maxSockets: 2 });
  });

  afterEach(async () => {
    jest.restoreAllMocks();
    agent.destroy();
    await app.app.close();
  });

  const desk = async () => (await request(app.url).get('/tasks').expect(200)).body as DeskStatus;

  /** Puts `id` in the pool and hands it to `editor`. */
  async function take(id: string, editor: string): Promise<void> {
    await request(app.url)
      .post('/tasks')
      .send({ ids: [id] })
      .expect(201);
    const taken = await sendJson<NextTaskResult>(
      agent,
      'POST',
      `${app.url}/editors/${editor}/next`,
    );
    expect(taken.body.task).toMatchObject({ id, attempt: 1 });
  }

  /**
   * Fails the sample's next `times` writes (`SampleRedis.exec`) the way a Redis timeout fails
   * them: the spy stands in for the sample's SampleRedis; Redis itself is real.
   */
  function failWrites(times: number): jest.SpyInstance {
    const exec = jest.spyOn(app.app.get(SampleRedis), 'exec');
    for (let i = 0; i < times; i++) exec.mockRejectedValueOnce(new Error('Command timed out'));
    return exec;
  }

  /** The desk after `editor`'s submit of `id` went through: nothing held, `id` submitted once. */
  async function expectSubmittedOnce(id: string, editor: string): Promise<void> {
    const after = await desk();
    expect(after.holders).toEqual([]);
    expect(after.submitted).toEqual({ [id]: { by: editor, times: 1 } });
    expect(after.pool).toMatchObject(queueStats());
  }

  it('keeps the task with its editor when the ack throws, so that submitting again finishes it once', async () => {
    await take('draft', 'gus');

    // The ack fails once the way a Redis timeout fails it (the test double stands in for the
    // sample's QueueService; Redis itself is real). Redis trouble is answered 503 + Retry-After.
    const ack = jest
      .spyOn(app.app.get(QueueService), 'ack')
      .mockRejectedValueOnce(new Error('Command timed out'));
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const failed = await sendJson(agent, 'POST', `${app.url}/editors/gus/submit`);
    logged.mockRestore();
    expect(failed.status).toBe(503);
    expect(failed.headers['retry-after']).toBe('1');
    expect(ack).toHaveBeenCalledTimes(1);

    // Gus still holds the task, its lease still runs, and nothing counts as submitted.
    const between = await desk();
    expect(between.holders).toEqual([
      {
        editor: 'gus',
        taskId: 'draft',
        attempt: 1,
        leaseExpiresInMs: expect.any(Number) as number,
      },
    ]);
    expect(between.holders[0].leaseExpiresInMs).toBeGreaterThan(0);
    expect(between.pool).toMatchObject(queueStats({ leased: 1 }));
    expect(between.submitted).toEqual({});

    // His retry is acked: the work is kept, submitted once.
    const retried = await sendJson(agent, 'POST', `${app.url}/editors/gus/submit`);
    expect(retried).toMatchObject({
      status: 200,
      body: { editor: 'gus', taskId: 'draft', attempt: 1 },
    });
    await expectSubmittedOnce('draft', 'gus');
  });

  it('writes the record of an acked submit again when the write fails: submitted once, nothing held', async () => {
    await take('column', 'hal');

    // The record's write after the ack fails twice, then goes through.
    const exec = failWrites(2);
    const done = await sendJson(agent, 'POST', `${app.url}/editors/hal/submit`);
    expect(done).toMatchObject({
      status: 200,
      body: { editor: 'hal', taskId: 'column', attempt: 1 },
    });
    expect(exec).toHaveBeenCalledTimes(3);
    exec.mockRestore();

    await expectSubmittedOnce('column', 'hal');
  });

  it('answers 503 when every record write fails after the ack, and the submit sent again records it once', async () => {
    await take('review', 'ida');

    const exec = failWrites(3);
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const failed = await sendJson(agent, 'POST', `${app.url}/editors/ida/submit`);
    logged.mockRestore();
    expect(failed.status).toBe(503);
    expect(exec).toHaveBeenCalledTimes(3);
    exec.mockRestore();

    // The task is completed in the queue, and Ida still holds it: her submit sent again is acked
    // again (same lease) and recorded, once.
    const between = await desk();
    expect(between.submitted).toEqual({});
    expect(between.holders.map((h) => h.editor)).toEqual(['ida']);
    const retried = await sendJson(agent, 'POST', `${app.url}/editors/ida/submit`);
    expect(retried).toMatchObject({ status: 200, body: { editor: 'ida', taskId: 'review' } });
    await expectSubmittedOnce('review', 'ida');
  });

  it("records an acked submit whose every record write failed at the editor's next call, when they never submit again", async () => {
    await request(app.url)
      .post('/tasks')
      .send({ ids: ['essay', 'letter'] })
      .expect(201);
    const taken = await sendJson<NextTaskResult>(agent, 'POST', `${app.url}/editors/joy/next`);
    expect(taken.body.task).toMatchObject({ id: 'essay', attempt: 1 });

    const exec = failWrites(3);
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const failed = await sendJson(agent, 'POST', `${app.url}/editors/joy/submit`);
    logged.mockRestore();
    expect(failed.status).toBe(503);
    exec.mockRestore();

    // Joy asks for her next task instead: the acked one is recorded, and she gets the next.
    const following = await sendJson<NextTaskResult>(agent, 'POST', `${app.url}/editors/joy/next`);
    expect(following.status).toBe(200);
    expect(following.body.task).toMatchObject({ id: 'letter', attempt: 1 });
    const after = await desk();
    expect(after.submitted).toEqual({ essay: { by: 'joy', times: 1 } });
    expect(after.holders.map((h) => [h.editor, h.taskId])).toEqual([['joy', 'letter']]);
  });
});
