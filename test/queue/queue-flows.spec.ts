import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { firstValueFrom, filter, take, toArray } from 'rxjs';
import {
  FlowError,
  MAX_FLOW_NODES,
  QueueFullError,
  QueueReplicationError,
  QueueService,
  UnrecoverableTaskError,
  type FlowNode,
  type QueueWorkerHandle,
  type RunningTask,
} from '../../lib';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';

describe('QueueService.enqueueFlow', () => {
  const prefix = uniquePrefix('queue-flows');
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

  /** Runs `handler` on `queue` in this process. */
  const work = (queue: string, handler: (task: RunningTask) => unknown) =>
    workers.push(queues.process(queue, handler as never, { concurrency: 10, leaseMs: 5_000 }));

  const state = async (queue: string, id: string) => (await queues.get(queue, id))?.state;

  it('runs the parent once after all its children, with their results', async () => {
    const [orders, payments, stock] = names('orders', 'payments', 'stock');
    const ids = await queues.enqueueFlow({
      queue: orders,
      id: 'o1',
      payload: { total: 990 },
      children: [
        { queue: payments, id: 'charge', payload: { amount: 990 } },
        { queue: stock, id: 'reserve', payload: { sku: 'A1' } },
        { queue: stock, id: 'noop' },
      ],
    });
    expect(ids).toEqual({
      queue: orders,
      id: 'o1',
      children: [
        { queue: payments, id: 'charge' },
        { queue: stock, id: 'reserve' },
        { queue: stock, id: 'noop' },
      ],
    });
    const parent = await queues.get(orders, 'o1');
    expect(parent).toMatchObject({
      state: 'waiting-children',
      payload: { total: 990 },
      children: { total: 3, completed: 0, failed: 0 },
    });
    expect(parent?.children?.missing).toBeUndefined();
    expect(await queues.list(orders, 'waiting-children')).toHaveLength(1);
    expect(parent?.time).toBe(parent?.enqueuedAt);
    // The parent is not claimable while it waits, and waitFor waits for it to run.
    expect(await queues.claim(orders, 10)).toEqual([]);
    const outcome = queues.waitFor(orders, 'o1', { timeoutMs: 20_000 });

    // On one node every parent is advanced by the script that completes its child.
    const outboxes = jest.spyOn(queues.store.flows, 'applyOutboxes');
    const ran: { results: unknown; failures: unknown; childrenDone: boolean }[] = [];
    work(payments, (t) => ({ charged: (t.payload as { amount: number }).amount }));
    await waitFor('the charge', async () => (await state(payments, 'charge')) === 'completed');
    expect((await queues.get(orders, 'o1'))?.children).toEqual({
      total: 3,
      completed: 1,
      failed: 0,
    });
    work(stock, (t) => (t.id === 'noop' ? undefined : 'reserved'));
    work(orders, async (t) => {
      ran.push({
        results: await t.childResults(),
        failures: await t.childFailures(),
        childrenDone:
          (await state(payments, 'charge')) === 'completed' &&
          (await state(stock, 'reserve')) === 'completed',
      });
      return 'confirmed';
    });
    expect(await outcome).toEqual({ state: 'completed', result: 'confirmed' });
    expect(ran).toEqual([
      {
        results: {
          [`${payments}:charge`]: { charged: 990 },
          [`${stock}:reserve`]: 'reserved',
          [`${stock}:noop`]: undefined,
        },
        failures: [],
        childrenDone: true,
      },
    ]);
    expect(Object.keys(ran[0].results as object)).toHaveLength(3);
    expect(outboxes).not.toHaveBeenCalled();
    outboxes.mockRestore();
    expect((await queues.get(orders, 'o1'))?.children).toEqual({
      total: 3,
      completed: 3,
      failed: 0,
    });
  });

  it('a flow of one task runs as a plain task, and the record that marks its call goes with it', async () => {
    const [solo] = names('solo');
    expect(await queues.enqueueFlow({ queue: solo, id: 's1', payload: { n: 1 } })).toEqual({
      queue: solo,
      id: 's1',
    });
    // The record of its call, with no children (add-flow.lua finds a call sent twice by it).
    const flowKey = queueRedisKeys(prefix, solo).flow;
    expect(JSON.parse((await redis.hget(flowKey, 's1'))!)).toMatchObject({ c: [] });
    expect(await queues.get(solo, 's1')).toMatchObject({ state: 'ready', payload: { n: 1 } });
    const seen: unknown[] = [];
    work(solo, async (task) => {
      seen.push(await task.childResults(), await task.childFailures());
      return 'done';
    });
    await waitFor('the task', async () => (await state(solo, 's1')) === 'completed');
    expect(seen).toEqual([{}, []]);
    const done = await queues.get(solo, 's1');
    expect(done).toMatchObject({ state: 'completed', result: 'done' });
    expect(done).not.toHaveProperty('children');
    // Forgotten with the task.
    expect(await queues.remove(solo, 's1')).toBe(true);
    expect(await redis.hexists(flowKey, 's1')).toBe(0);
  });

  it('runs a tree 3 levels deep bottom-up, over queues of one tag and not', async () => {
    const [a, b, c] = names('{t}a', '{t}b', 'c');
    const order: string[] = [];
    const tree: FlowNode = {
      queue: a,
      id: 'root',
      children: [
        {
          queue: b,
          id: 'mid1',
          children: [
            { queue: c, id: 'leaf1', payload: 1 },
            { queue: c, id: 'leaf2', payload: 2 },
          ],
        },
        { queue: b, id: 'mid2', children: [{ queue: c, id: 'leaf3', payload: 3 }] },
      ],
    };
    await queues.enqueueFlow(tree);
    const sum = async (t: RunningTask) => {
      order.push(t.id);
      const r = await t.childResults<number>();
      return Object.values(r).reduce((x, y) => x + y, 0);
    };
    work(c, (t) => {
      order.push(t.id);
      return t.payload;
    });
    work(b, sum);
    work(a, sum);
    await waitFor('the root', async () => (await state(a, 'root')) === 'completed', 10_000);
    expect((await queues.get(a, 'root'))?.result).toBe(6);
    expect(order.indexOf('root')).toBe(5);
    expect(order.indexOf('mid1')).toBeGreaterThan(
      Math.max(order.indexOf('leaf1'), order.indexOf('leaf2')),
    );
    expect(order.indexOf('mid2')).toBeGreaterThan(order.indexOf('leaf3'));
  });

  describe('onChildFailure', () => {
    it("'fail-parent' (default): the parent goes dead at once, its error naming the child", async () => {
      const [p, ch] = names('p', 'ch');
      await queues.enqueueFlow({
        queue: p,
        id: 'parent',
        children: [
          { queue: ch, id: 'bad' },
          { queue: ch, id: 'slow', options: { onChildFailure: 'ignore' } },
        ],
      });
      const claimed = await queues.claim(ch, 2);
      const bad = claimed.find((t) => t.id === 'bad')!;
      await queues.nack(bad, { maxAttempts: 1, error: new Error('card declined') });
      const dead = await queues.get(p, 'parent');
      expect(dead).toMatchObject({
        state: 'dead',
        error: { name: 'FlowChildFailedError' },
        children: { total: 2, completed: 0, failed: 1 },
      });
      expect(dead?.error?.message).toContain(`child '${ch}:bad' of '${p}:parent' failed`);
      expect(dead?.error?.message).toContain('card declined');
      // The other child's completion changes nothing.
      await queues.ack(
        claimed.find((t) => t.id === 'slow')!,
        'late',
      );
      expect(await state(p, 'parent')).toBe('dead');
      expect(await queues.claim(p, 1)).toEqual([]);
    });

    it("'ignore': the parent runs once every child finished, the failure listed", async () => {
      const [p, ch] = names('p', 'ch');
      await queues.enqueueFlow({
        queue: p,
        id: 'parent',
        children: [
          { queue: ch, id: 'ok' },
          { queue: ch, id: 'bad', options: { onChildFailure: 'ignore', maxAttempts: 1 } },
        ],
      });
      work(ch, (t) => {
        if (t.id === 'bad') throw new UnrecoverableTaskError('no stock');
        return 'fine';
      });
      let seen: unknown;
      work(p, async (t) => {
        seen = { results: await t.childResults(), failures: await t.childFailures() };
      });
      await waitFor('the parent', async () => (await state(p, 'parent')) === 'completed');
      expect(seen).toEqual({
        results: { [`${ch}:ok`]: 'fine' },
        failures: [
          {
            queue: ch,
            id: 'bad',
            error: expect.objectContaining({ message: 'no stock' }) as unknown,
          },
        ],
      });
    });

    it("'wait': the parent waits until the child is requeued from the dead letters and completes", async () => {
      const [p, ch] = names('p', 'ch');
      await queues.enqueueFlow({
        queue: p,
        id: 'parent',
        children: [{ queue: ch, id: 'flaky', options: { onChildFailure: 'wait' } }],
      });
      const [t] = await queues.claim(ch, 1);
      await queues.nack(t, { maxAttempts: 1, error: new Error('down') });
      expect(await state(ch, 'flaky')).toBe('dead');
      expect(await queues.get(p, 'parent')).toMatchObject({
        state: 'waiting-children',
        children: { total: 1, completed: 0, failed: 1 },
      });
      expect(await queues.requeueDead(ch, 'flaky')).toBe(1);
      const [again] = await queues.claim(ch, 1);
      await queues.ack(again, 'up');
      expect(await state(p, 'parent')).toBe('ready');
      const [parent] = await queues.claim(p, 1);
      expect(parent.id).toBe('parent');
      expect(await queues.get(p, 'parent')).toMatchObject({
        children: { total: 1, completed: 1, failed: 0 },
      });
    });

    it('a child whose lease ran out past its attempts fails its parent (through the outbox)', async () => {
      const [p, ch] = names('p', 'ch');
      await queues.enqueueFlow({
        queue: p,
        id: 'parent',
        children: [{ queue: ch, id: 'lost', options: { maxAttempts: 1 } }],
      });
      await queues.claim(ch, 1, { leaseMs: 1 });
      await waitFor('the lease to run out', async () => {
        await queues.claim(ch, 1);
        return (await state(ch, 'lost')) === 'dead';
      });
      expect(await queues.get(p, 'parent')).toMatchObject({
        state: 'dead',
        error: { name: 'FlowChildFailedError' },
      });
    });

    it('a dead parent fails its own parent in turn', async () => {
      const [a, b, c] = names('a', 'b', 'c');
      await queues.enqueueFlow({
        queue: a,
        id: 'top',
        children: [{ queue: b, id: 'mid', children: [{ queue: c, id: 'leaf' }] }],
      });
      const [leaf] = await queues.claim(c, 1);
      await queues.nack(leaf, { maxAttempts: 1, error: new Error('boom') });
      expect(await state(b, 'mid')).toBe('dead');
      expect(await state(a, 'top')).toBe('dead');
      expect((await queues.get(a, 'top'))?.error?.message).toContain(`child '${b}:mid'`);
    });
  });

  it('cancelling a parent cancels its unfinished children, at every level', async () => {
    const [a, b] = names('a', 'b');
    await queues.enqueueFlow({
      queue: a,
      id: 'top',
      children: [
        { queue: b, id: 'done' },
        { queue: b, id: 'mid', children: [{ queue: b, id: 'leaf' }] },
      ],
    });
    const [first] = await queues.claim(b, 1);
    expect(first.id).toBe('done');
    await queues.ack(first, 1);
    expect(await queues.cancel(a, 'top', { reason: 'order withdrawn' })).toBe('cancelled');
    expect(await state(a, 'top')).toBe('cancelled');
    expect(await state(b, 'done')).toBe('completed');
    expect(await state(b, 'mid')).toBe('cancelled');
    expect(await state(b, 'leaf')).toBe('cancelled');
    expect((await queues.get(b, 'leaf'))?.error?.message).toContain('order withdrawn');
    expect(await queues.claim(b, 10)).toEqual([]);
  });

  it('removing a waiting parent cancels its children; cancelling a child fails its parent', async () => {
    const [a, b] = names('a', 'b');
    await queues.enqueueFlow({ queue: a, id: 'p1', children: [{ queue: b, id: 'k1' }] });
    expect(await queues.remove(a, 'p1')).toBe(true);
    expect(await queues.get(a, 'p1')).toBeUndefined();
    expect(await state(b, 'k1')).toBe('cancelled');

    await queues.enqueueFlow({ queue: a, id: 'p2', children: [{ queue: b, id: 'k2' }] });
    expect(await queues.cancel(b, 'k2')).toBe('cancelled');
    expect(await state(a, 'p2')).toBe('dead');
  });

  it("writes 'waiting-children' and, once the children are done, 'enqueued' events", async () => {
    const [a, b] = names('a', 'b');
    // From the start of the stream: the queue is new, so these are the flow's events.
    const seen = firstValueFrom(
      queues.events(a, { from: 'start' }).pipe(
        filter((e) => e.taskId === 'p'),
        take(2),
        toArray(),
      ),
    );
    await queues.enqueueFlow({ queue: a, id: 'p', children: [{ queue: b, id: 'c' }] });
    const [c] = await queues.claim(b, 1);
    await queues.ack(c);
    expect((await seen).map((e) => e.type)).toEqual(['waiting-children', 'enqueued']);
  });

  describe('refuses a bad flow before writing anything, naming the node', () => {
    const refused = async (flow: unknown, message: RegExp) => {
      const err = (await queues.enqueueFlow(flow as FlowNode).catch((e: unknown) => e)) as Error;
      expect(err).toBeInstanceOf(FlowError);
      expect(err.message).toMatch(message);
      return err as FlowError;
    };

    it('a duplicate queue:id, a cycle, an empty queue name, a bad option', async () => {
      const [a] = names('a');
      await refused(
        {
          queue: a,
          id: 1,
          children: [
            { queue: a, id: 2 },
            { queue: a, id: '2' },
          ],
        },
        new RegExp(`flow node '${a}:2': appears twice`),
      );
      const loop: FlowNode = { queue: a, id: 'x', children: [] };
      loop.children!.push({ queue: a, id: 'y', children: [loop] });
      await refused(loop, /same node object appears twice/);
      const empty = await refused(
        { queue: a, id: 'r', children: [{ queue: '', id: 'c' }] },
        /flow node 'a\d+:r'\.children\[0\]: invalid argument 'queue'/,
      );
      expect(empty.node).toBe(`'${a}:r'.children[0]`);
      await refused(
        { queue: a, id: 'r', children: [{ queue: a, id: 'c', options: { onChildFailure: 'x' } }] },
        /flow node 'a\d+:c': invalid option 'onChildFailure'/,
      );
      await refused({ queue: a, id: 'r', extra: 1 }, /flow node 'a\d+:r'/);
      expect(await redis.keys(`${prefix}queue:{${a}}:*`)).toEqual([]);
    });

    it(`more than MAX_FLOW_NODES (${MAX_FLOW_NODES}) nodes`, async () => {
      const [a] = names('a');
      const children = Array.from({ length: MAX_FLOW_NODES }, (_, i) => ({ queue: a, id: i }));
      await refused({ queue: a, id: 'root', children }, /more than 1000 nodes/);
      expect(await redis.keys(`${prefix}queue:{${a}}:*`)).toEqual([]);
      // The limit itself is accepted.
      await queues.enqueueFlow({ queue: a, id: 'root', children: children.slice(1) });
      expect((await queues.stats(a)).ready).toBe(MAX_FLOW_NODES - 1);
    });

    it('a task that exists already: nothing of the flow is added', async () => {
      const [a, b] = names('a', 'b');
      await queues.enqueue(b, 'taken');
      await refused(
        {
          queue: a,
          id: 'p',
          children: [
            { queue: b, id: 'free' },
            { queue: b, id: 'taken' },
          ],
        },
        new RegExp(`flow node '${b}:taken': a task with this id exists already`),
      );
      expect(await queues.get(a, 'p')).toBeUndefined();
      expect(await queues.get(b, 'free')).toBeUndefined();
    });
  });

  it('waitForReplicas on a server without replicas: refused unsent, saying so', async () => {
    const [a] = names('a');
    const err = (await queues
      .enqueueFlow(
        { queue: a, id: 'p', children: [{ queue: a, id: 'c' }] },
        { waitForReplicas: { replicas: 1, timeoutMs: 100 } },
      )
      .catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(QueueReplicationError);
    expect(err.message).toMatch(/replica/);
    expect(await queues.get(a, 'p')).toBeUndefined();
  });

  it('maxSize: each task counts against its own queue, all or nothing', async () => {
    const [a, b] = names('a', 'b');
    await queues.setMaxSize(b, 5);
    await queues.enqueue(b, ['x1', 'x2', 'x3']);
    const flow = (id: string, kids: number): FlowNode => ({
      queue: a,
      id,
      children: Array.from({ length: kids }, (_, i) => ({ queue: b, id: `${id}-${i}` })),
    });
    const err = (await queues
      .enqueueFlow(flow('big', 3))
      .catch((e: unknown) => e)) as QueueFullError;
    expect(err).toBeInstanceOf(QueueFullError);
    expect(err).toMatchObject({ queue: b, size: 3, maxSize: 5 });
    expect(await queues.get(a, 'big')).toBeUndefined();
    expect((await queues.stats(b)).ready).toBe(3);
    await queues.enqueueFlow(flow('fits', 2));
    expect((await queues.stats(b)).ready).toBe(5);
    expect(await state(a, 'fits')).toBe('waiting-children');
  });
});
