import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { QueueService, type FlowNode } from '../../lib';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { createLockApp, redisClient, uniquePrefix } from '../support/helpers';

/**
 * A flow child's link to its parent (the `parents` hash of the child's queue): deleted with the
 * child, and counted only for the parent of the enqueueFlow call that wrote it. Also the bound of
 * the `FlowChildFailedError` messages a failing flow writes.
 */
describe('QueueService flows: parent links and child-failure messages', () => {
  const prefix = uniquePrefix('flow-links');
  let app: INestApplicationContext;
  let queues: QueueService;
  let redis: Redis;
  let n = 0;
  /** Queue names of one test: no test sees another's tasks. */
  const names = (...parts: string[]) => {
    n++;
    return parts.map((p) => `${p}${n}`);
  };
  const keys = (queue: string) => queueRedisKeys(prefix, queue);
  const links = (queue: string) => redis.hlen(keys(queue).parents);
  const state = async (queue: string, id: string) => (await queues.get(queue, id))?.state;

  beforeAll(async () => {
    app = await createLockApp({
      keyPrefix: prefix,
      queue: {
        backoffMs: 0,
        keepCompleted: { count: 10_000, ageMs: 600_000 },
        keepDead: { count: 10_000, ageMs: 600_000 },
      },
    });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  /** Claims task `id` of `queue` (the only ready one) and fails it for good. */
  const kill = async (queue: string, id: string) => {
    const [task] = await queues.claim(queue, 1);
    expect(task.id).toBe(id);
    expect(await queues.nack(task, { maxAttempts: 1, error: new Error('boom') })).toBe('dead');
  };

  it("deletes a 'wait' child's link with the child: remove, clean('dead'), drain, cancelled and removed", async () => {
    const [p, c] = names('p', 'c');
    const flow = (id: string): FlowNode => ({
      queue: p,
      id: `P-${id}`,
      children: [{ queue: c, id, options: { onChildFailure: 'wait' } }],
    });
    // Dead, then its parent cancelled, then the dead child removed (the user gave up).
    await queues.enqueueFlow(flow('dead-removed'));
    await kill(c, 'dead-removed');
    expect(await links(c)).toBe(1);
    expect(await queues.cancel(p, 'P-dead-removed')).toBe('cancelled');
    expect(await queues.remove(p, 'P-dead-removed')).toBe(true);
    expect(await queues.remove(c, 'dead-removed')).toBe(true);
    expect(await links(c)).toBe(0);

    // Dead and deleted by clean('dead'): nothing can requeue it, nothing counts for its parent.
    await queues.enqueueFlow(flow('dead-cleaned'));
    await kill(c, 'dead-cleaned');
    expect(await links(c)).toBe(1);
    expect(await queues.clean(c, 'dead', { olderThanMs: 0 })).toBe(1);
    expect(await links(c)).toBe(0);
    expect(await state(p, 'P-dead-cleaned')).toBe('waiting-children');

    // Cancelled with its parent (cancel cascades), then removed.
    await queues.enqueueFlow(flow('cancelled'));
    expect(await queues.cancel(p, 'P-cancelled')).toBe('cancelled');
    expect(await state(c, 'cancelled')).toBe('cancelled');
    expect(await queues.remove(c, 'cancelled')).toBe(true);
    expect(await links(c)).toBe(0);

    // Drained while it waits: it fails for its parent (which waits under 'wait'), its link goes.
    await queues.enqueueFlow(flow('drained'));
    expect(await queues.drain(c)).toBe(1);
    expect(await links(c)).toBe(0);
    expect(await state(p, 'P-drained')).toBe('waiting-children');

    // Removed while it waits.
    await queues.enqueueFlow(flow('removed'));
    expect(await queues.remove(c, 'removed')).toBe(true);
    expect(await links(c)).toBe(0);
    expect(await redis.hlen(keys(c).info)).toBe(0);
  });

  it("deletes the link of a 'wait' child trimmed by keepDead, after its parent learned the failure", async () => {
    // keepDead count 0: a dead or cancelled task is deleted by the script that ends it.
    const trimming = await createLockApp({
      keyPrefix: prefix,
      queue: { backoffMs: 0, keepDead: { count: 0, ageMs: 0 } },
    });
    try {
      const q = trimming.get(QueueService);
      const [p, c] = names('p', 'c');
      await q.enqueueFlow({
        queue: p,
        id: 'P',
        children: [
          { queue: c, id: 'waits', options: { onChildFailure: 'wait' } },
          { queue: c, id: 'ignored', options: { onChildFailure: 'ignore' } },
          { queue: c, id: 'cancelled', options: { onChildFailure: 'wait' } },
        ],
      });
      expect(await links(c)).toBe(3);
      const leased = new Map((await q.claim(c, 3)).map((t) => [t.id, t]));
      expect([...leased.keys()].sort()).toEqual(['cancelled', 'ignored', 'waits']);
      for (const id of ['waits', 'ignored']) {
        const error = new Error(`${id} failed`);
        expect(await q.nack(leased.get(id)!, { maxAttempts: 1, error })).toBe('dead');
      }
      // A leased child cancelled: it ends cancelled at its settle, and is trimmed at once.
      expect(await q.cancel(c, 'cancelled')).toBe('signalled');
      expect(await q.nack(leased.get('cancelled')!, { maxAttempts: 1 })).toBe('cancelled');
      expect(await q.stats(c)).toMatchObject({ dead: 0, cancelled: 0 });
      expect(await redis.hlen(keys(c).info)).toBe(0);
      // The parent learned every failure before the links went: one ignored, two awaited.
      expect(await q.get(p, 'P')).toMatchObject({
        state: 'waiting-children',
        children: { total: 3, completed: 0, failed: 3 },
      });
      expect(await links(c)).toBe(0);
    } finally {
      await trimming.close();
    }
  });

  it('applies a link only to the parent of the flow that wrote it; a link without a flow id (written before links had one) still counts', async () => {
    const [p, c, d] = names('p', 'c', 'd');
    // Flow 1: C1 dies under 'wait' (kept in the dead letters: its link stays), and the user gives
    // up on the parent: cancelled, then removed.
    await queues.enqueueFlow({
      queue: p,
      id: 'P',
      children: [{ queue: c, id: 'C1', options: { onChildFailure: 'wait' } }],
    });
    await kill(c, 'C1');
    expect(await queues.cancel(p, 'P')).toBe('cancelled');
    expect(await queues.remove(p, 'P')).toBe(true);
    expect(await links(c)).toBe(1);
    // Flow 2 reuses the parent's id, with another child.
    await queues.enqueueFlow({ queue: p, id: 'P', children: [{ queue: d, id: 'D' }] });
    // C1, requeued from the dead letters, completes: it is flow 1's child, not flow 2's.
    expect(await queues.requeueDead(c, 'C1')).toBe(1);
    const [c1] = await queues.claim(c, 1);
    expect(c1.id).toBe('C1');
    expect(await queues.ack(c1, 'from flow 1')).toBe(true);
    expect(await queues.get(p, 'P')).toMatchObject({
      state: 'waiting-children',
      children: { total: 1, completed: 0, failed: 0 },
    });
    expect(await redis.zscore(keys(p).wchildren, 'P')).toBe('1');
    // Completed: its link is gone.
    expect(await links(c)).toBe(0);

    // Flow 2's own child counts.
    const [dTask] = await queues.claim(d, 1);
    expect(await queues.ack(dTask, 'from flow 2')).toBe(true);
    expect(await state(p, 'P')).toBe('ready');

    // Records of the version before: a link without k, or a parent's record without k (it was
    // only in the first node's record of each call), is applied as then.
    await queues.enqueueFlow({
      queue: p,
      id: 'Q',
      children: [
        { queue: d, id: 'E' },
        { queue: d, id: 'F' },
      ],
    });
    const link = JSON.parse((await redis.hget(keys(d).parents, 'E'))!) as Record<string, unknown>;
    expect(typeof link.k).toBe('string');
    const record = JSON.parse((await redis.hget(keys(p).flow, 'Q'))!) as Record<string, unknown>;
    expect(record.k).toBe(link.k);
    delete link.k;
    await redis.hset(keys(d).parents, 'E', JSON.stringify(link));
    const [e] = await queues.claim(d, 1);
    expect(e.id).toBe('E');
    expect(await queues.ack(e, 'legacy link')).toBe(true);
    expect(await queues.get(p, 'Q')).toMatchObject({ children: { completed: 1 } });
    delete record.k;
    await redis.hset(keys(p).flow, 'Q', JSON.stringify(record));
    const [f] = await queues.claim(d, 1);
    expect(f.id).toBe('F');
    expect(await queues.ack(f, 'legacy record')).toBe(true);
    expect(await state(p, 'Q')).toBe('ready');
  });

  it('cuts a FlowChildFailedError message to 1,000 characters, as encodeTaskError cuts a handler error, however deep the flow', async () => {
    const [q] = names('deep');
    // A chain of 40 nodes with 60-character ids: each level's message embeds the level below.
    const depth = 40;
    const id = (i: number) => `node-${String(i).padStart(3, '0')}-${'x'.repeat(51)}`;
    let node: FlowNode = { queue: q, id: id(depth - 1) };
    for (let i = depth - 2; i >= 0; i--) node = { queue: q, id: id(i), children: [node] };
    await queues.enqueueFlow(node);
    await kill(q, id(depth - 1));
    const root = await queues.get(q, id(0));
    expect(root?.state).toBe('dead');
    const message = root!.error!.message;
    expect(root!.error!.name).toBe('FlowChildFailedError');
    expect(message).toHaveLength(1_000);
    // The start is kept: the failing child and its parent, then what the child said.
    expect(
      message.startsWith(`child '${q}:${id(1)}' of '${q}:${id(0)}' failed: child '${q}:`),
    ).toBe(true);
    // Every level is bounded: the errors hash holds 40 errors of about 1 KB, not O(depth²).
    const errors = await redis.hvals(keys(q).errors);
    expect(errors).toHaveLength(depth);
    for (const e of errors) {
      expect((JSON.parse(e) as { message: string }).message.length).toBeLessThanOrEqual(1_000);
    }
  });

  it('cuts it between characters, counting them as JavaScript does (a character outside the BMP is 2)', async () => {
    const [p, c] = names('p', 'c');
    // A prefix of odd length: the 1,000th code unit falls inside an emoji.
    const prefixOf = (child: string) => `child '${c}:${child}' of '${p}:P' failed: `;
    const child = prefixOf('C').length % 2 === 1 ? 'C' : 'CC';
    await queues.enqueueFlow({ queue: p, id: 'P', children: [{ queue: c, id: child }] });
    // 1,000 characters as JavaScript counts them (500 emoji of 2 UTF-16 code units each): the
    // longest message a handler's error keeps.
    const why = '\u{1F600}'.repeat(500);
    const [task] = await queues.claim(c, 1);
    expect(await queues.nack(task, { maxAttempts: 1, error: new Error(why) })).toBe('dead');
    const full = prefixOf(child) + why;
    const message = (await queues.get(p, 'P'))!.error!.message;
    // The emoji that would be split is left out whole: 999 code units.
    expect(message).toBe(full.slice(0, 999));
    expect(message).not.toContain('\uFFFD');
  });

  it('gives the parent the message of a child whose error ends in half an emoji, as U+FFFD, with no stack', async () => {
    const [p, c] = names('p', 'c');
    await queues.enqueueFlow({ queue: p, id: 'P', children: [{ queue: c, id: 'C' }] });
    const [task] = await queues.claim(c, 1);
    // An emoji cut by `slice`: its high surrogate alone, which JSON.stringify writes as \ud83d.
    const why = 'card declined \u{1F4B3}'.slice(0, -1);
    expect(await queues.nack(task, { maxAttempts: 1, error: new Error(why) })).toBe('dead');
    const error = (await queues.get(p, 'P'))!.error!;
    expect(error.name).toBe('FlowChildFailedError');
    expect(error.message).toBe(`child '${c}:C' of '${p}:P' failed: card declined \uFFFD`);
    // Stored well-formed: the child's own error reads the same.
    expect((await queues.get(c, 'C'))!.error!.message).toBe('card declined \uFFFD');
  });

  it('gives the parent the reason of a child cancelled with half an emoji, as U+FFFD', async () => {
    const [p, c] = names('p', 'c');
    await queues.enqueueFlow({ queue: p, id: 'P', children: [{ queue: c, id: 'C' }] });
    // Stored as given, half an emoji made JSON that cjson refuses: the parent got the raw JSON.
    expect(await queues.cancel(c, 'C', { reason: 'user left \u{1F44B}'.slice(0, -1) })).toBe(
      'cancelled',
    );
    const error = (await queues.get(p, 'P'))!.error!;
    expect(error.name).toBe('FlowChildFailedError');
    expect(error.message).toBe(`child '${c}:C' of '${p}:P' failed: cancelled: user left \uFFFD`);
  });
});
