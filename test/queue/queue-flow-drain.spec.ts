import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { QueueService, type QueueWorkerHandle, type RunningTask } from '../../lib';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { createLockApp, redisClient, uniquePrefix } from '../support/helpers';

/**
 * A flow child deleted by `drain`, `pop` or `dequeue` ends for its parent (docs/queue.md,
 * "Flows"): drained, it failed (as `remove` makes it); popped or dequeued, it completed without a
 * result (handed to the caller). Its parent never waits for it forever, and no flow link is left.
 */
describe('QueueService: a flow child drained, popped or dequeued ends for its parent', () => {
  const prefix = uniquePrefix('queue-flow-drain');
  let app: INestApplicationContext;
  let queues: QueueService;
  let redis: Redis;
  const workers: QueueWorkerHandle[] = [];
  let n = 0;
  /** Queue names of one test: no test sees another's tasks. */
  const names = (...parts: string[]) => {
    n++;
    return parts.map((p) => `${p}${n}`);
  };

  beforeAll(async () => {
    app = await createLockApp({
      keyPrefix: prefix,
      queue: { backoffMs: 0, keepCompleted: { count: 10_000, ageMs: 600_000 } },
    });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close()));
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  const state = async (queue: string, id: string) => (await queues.get(queue, id))?.state;

  /** The flow keys of `queues` that still exist: a child's link, an outbox, a waiting parent's. */
  const flowLinks = async (...queueNames: string[]) => {
    const left: string[] = [];
    for (const name of queueNames) {
      const k = queueRedisKeys(prefix, name);
      for (const key of [k.parents, k.outbox, k.wchildren, k.cdone]) {
        if ((await redis.exists(key)) === 1) left.push(key);
      }
    }
    return left;
  };

  describe('drain: the child failed, as remove makes it', () => {
    it("'fail-parent' (default): the parent goes dead, waitFor settles, no link is left", async () => {
      const [p, ch] = names('p', 'ch');
      await queues.enqueueFlow({
        queue: p,
        id: 'parent',
        children: [
          { queue: ch, id: 'c1' },
          { queue: ch, id: 'c2' },
        ],
      });
      const outcome = queues.waitFor(p, 'parent', { timeoutMs: 10_000 });
      expect(await queues.drain(ch)).toBe(2);

      const dead = await queues.get(p, 'parent');
      expect(dead).toMatchObject({
        state: 'dead',
        error: { name: 'FlowChildFailedError' },
        // The first failure killed the parent; the second no longer counts.
        children: { total: 2, completed: 0, failed: 1 },
      });
      expect(dead?.children?.missing).toBeUndefined();
      expect(dead?.error?.message).toMatch(new RegExp(`child '${ch}:c[12]' of '${p}:parent'`));
      expect(dead?.error?.message).toContain('removed');
      await expect(outcome).resolves.toMatchObject({
        state: 'dead',
        error: { name: 'FlowChildFailedError' },
      });
      expect(await flowLinks(p, ch)).toEqual([]);
      expect(await queues.get(ch, 'c1')).toBeUndefined();
    });

    it('ends the parent exactly as remove does: same state, counts and error', async () => {
      const [p, ch] = names('p', 'ch');
      await queues.enqueueFlow({ queue: p, id: 'drained', children: [{ queue: ch, id: 'd' }] });
      await queues.drain(ch);
      await queues.enqueueFlow({ queue: p, id: 'removed', children: [{ queue: ch, id: 'r' }] });
      expect(await queues.remove(ch, 'r')).toBe(true);
      const [drained, removed] = [await queues.get(p, 'drained'), await queues.get(p, 'removed')];
      expect(drained?.state).toBe(removed?.state);
      expect(drained?.children).toEqual(removed?.children);
      expect(removed?.error?.message).toBe(`child '${ch}:r' of '${p}:removed' failed: removed`);
      expect(drained?.error?.message).toBe(`child '${ch}:d' of '${p}:drained' failed: removed`);
      expect(await flowLinks(p, ch)).toEqual([]);
    });

    it("'ignore': the parent runs once its other children finished, the drained one failed", async () => {
      const [p, ch, other] = names('p', 'ch', 'other');
      await queues.enqueueFlow({
        queue: p,
        id: 'parent',
        children: [
          { queue: ch, id: 'gone', options: { onChildFailure: 'ignore' } },
          { queue: other, id: 'ok' },
        ],
      });
      const outcome = queues.waitFor(p, 'parent', { timeoutMs: 10_000 });
      expect(await queues.drain(ch)).toBe(1);
      expect(await queues.get(p, 'parent')).toMatchObject({
        state: 'waiting-children',
        children: { total: 2, completed: 0, failed: 1 },
      });
      const [ok] = await queues.claim(other, 1);
      await queues.ack(ok, 'fine');
      expect(await state(p, 'parent')).toBe('ready');
      let seen: unknown;
      workers.push(
        queues.process(p, async (t: RunningTask) => {
          seen = { results: await t.childResults(), failures: await t.childFailures() };
          return 'done';
        }),
      );
      await expect(outcome).resolves.toEqual({ state: 'completed', result: 'done' });
      expect(seen).toEqual({
        results: { [`${other}:ok`]: 'fine' },
        failures: [
          {
            queue: ch,
            id: 'gone',
            error: expect.objectContaining({ name: 'QueueError', message: 'removed' }) as unknown,
          },
        ],
      });
      expect(await flowLinks(p, ch, other)).toEqual([]);
    });

    it("'wait': the parent keeps waiting, as after remove (the deleted child's link goes with it)", async () => {
      const [p, ch] = names('p', 'ch');
      await queues.enqueueFlow({
        queue: p,
        id: 'drained',
        children: [{ queue: ch, id: 'd', options: { onChildFailure: 'wait' } }],
      });
      await queues.enqueueFlow({
        queue: p,
        id: 'removed',
        children: [{ queue: ch, id: 'r', options: { onChildFailure: 'wait' } }],
      });
      expect(await queues.remove(ch, 'r')).toBe(true);
      // Only 'd' is still waiting in ch.
      expect(await queues.drain(ch)).toBe(1);
      const [drained, removed] = [await queues.get(p, 'drained'), await queues.get(p, 'removed')];
      expect(drained).toMatchObject({
        state: 'waiting-children',
        children: { total: 1, completed: 0, failed: 1 },
      });
      expect(drained?.children).toEqual(removed?.children);
      // Deleted, neither can be requeued: their links went with them (nothing else deletes them).
      expect(await redis.hkeys(queueRedisKeys(prefix, ch).parents)).toEqual([]);
    });

    it('a plain queue drains as before and gets no flow key', async () => {
      // A plain queue: drain still deletes everything, and writes no flow key.
      const [plain] = names('plain');
      await queues.enqueue(plain, ['a', 'b', 'c']);
      expect(await queues.drain(plain)).toBe(3);
      expect(await flowLinks(plain)).toEqual([]);
    });
  });

  describe('pop and dequeue: the child completed, without a result (handed to the caller)', () => {
    it('pop: the parent becomes ready once its last child was popped, and runs', async () => {
      const [p, ch] = names('p', 'ch');
      await queues.enqueueFlow({
        queue: p,
        id: 'parent',
        children: [
          { queue: ch, id: 'c1', payload: 1 },
          { queue: ch, id: 'c2', payload: 2, options: { onChildFailure: 'wait' } },
        ],
      });
      const outcome = queues.waitFor(p, 'parent', { timeoutMs: 10_000 });
      const [first] = await queues.pop(ch, 1);
      expect(first).toMatchObject({ queue: ch, id: 'c1', payload: 1 });
      expect(await queues.get(p, 'parent')).toMatchObject({
        state: 'waiting-children',
        children: { total: 2, completed: 1, failed: 0 },
      });
      expect((await queues.pop(ch, 5)).map((t) => [t.id, t.payload])).toEqual([['c2', 2]]);
      expect(await state(p, 'parent')).toBe('ready');
      expect(await flowLinks(p, ch)).toEqual([]);

      let results: unknown;
      workers.push(
        queues.process(p, async (t: RunningTask) => {
          results = await t.childResults();
          return 'ran';
        }),
      );
      await expect(outcome).resolves.toEqual({ state: 'completed', result: 'ran' });
      expect(results).toEqual({ [`${ch}:c1`]: undefined, [`${ch}:c2`]: undefined });
      expect(await flowLinks(p, ch)).toEqual([]);
    });

    it('dequeue: the child completes for its parent; a stale score changes nothing', async () => {
      const [p, ch] = names('p', 'ch');
      await queues.enqueueFlow({ queue: p, id: 'parent', children: [{ queue: ch, id: 'only' }] });
      const outcome = queues.waitFor(p, 'parent', { timeoutMs: 10_000 });
      const [task] = await queues.top(ch);
      expect(task.id).toBe('only');
      expect(await queues.dequeue(ch, 'only', task.score + 1)).toBe(false);
      expect(await state(p, 'parent')).toBe('waiting-children');
      expect(await queues.dequeue(ch, 'only', task.score)).toBe(true);
      expect(await queues.get(p, 'parent')).toMatchObject({
        state: 'ready',
        children: { total: 1, completed: 1, failed: 0 },
      });
      expect(await flowLinks(p, ch)).toEqual([]);
      const [parent] = await queues.claim(p, 1);
      await queues.ack(parent, 'ok');
      await expect(outcome).resolves.toEqual({ state: 'completed', result: 'ok' });
    });

    it('a popped ready parent completes for its own parent, and its flow record goes with it', async () => {
      const [a, b, c] = names('a', 'b', 'c');
      await queues.enqueueFlow({
        queue: a,
        id: 'top',
        children: [{ queue: b, id: 'mid', children: [{ queue: c, id: 'leaf' }] }],
      });
      const [leaf] = await queues.claim(c, 1);
      await queues.ack(leaf, 'leafy');
      expect(await state(b, 'mid')).toBe('ready');
      expect(await redis.hexists(queueRedisKeys(prefix, b).flow, 'mid')).toBe(1);

      const outcome = queues.waitFor(a, 'top', { timeoutMs: 10_000 });
      expect((await queues.pop(b, 1)).map((t) => t.id)).toEqual(['mid']);
      expect(await redis.hexists(queueRedisKeys(prefix, b).flow, 'mid')).toBe(0);
      expect(await state(a, 'top')).toBe('ready');
      const [top] = await queues.claim(a, 1);
      await queues.ack(top, 'topped');
      await expect(outcome).resolves.toEqual({ state: 'completed', result: 'topped' });
      expect(await flowLinks(a, b, c)).toEqual([]);
    });

    it('plain tasks pop and dequeue as before, mixed with flow children', async () => {
      const [p, ch] = names('p', 'ch');
      await queues.enqueue(ch, 'plain1', { payload: 'x' });
      await queues.enqueueFlow({ queue: p, id: 'parent', children: [{ queue: ch, id: 'kid' }] });
      await queues.enqueue(ch, 'plain2');
      const popped = await queues.pop(ch, 10);
      expect(popped.map((t) => [t.id, t.payload]).sort()).toEqual([
        ['kid', undefined],
        ['plain1', 'x'],
        ['plain2', undefined],
      ]);
      expect(await state(p, 'parent')).toBe('ready');
      expect(await flowLinks(p, ch)).toEqual([]);
      await queues.enqueue(ch, 'plain3', { payload: 'y' });
      const [plain3] = await queues.top(ch);
      expect(await queues.dequeue(ch, 'plain3', plain3.score)).toBe(true);
      expect(await queues.get(ch, 'plain3')).toBeUndefined();
      expect(await flowLinks(ch)).toEqual([]);
    });
  });
});
