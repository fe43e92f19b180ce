import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { QueueService } from '../../lib';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';

/**
 * The `expiries` set (id -> deadline of tasks enqueued with `expiresInMs` / `expiresAt`) holds
 * only tasks that can still wait: a task that ended for good leaves it at once, not at its
 * deadline (30 days here), so the set does not grow with the tasks a queue ran.
 */
describe('QueueService: the expiries set is bounded by the tasks that can still wait', () => {
  const prefix = uniquePrefix('expiries-bound');
  const MONTH = 30 * 86_400_000;
  let app: INestApplicationContext;
  let queues: QueueService;
  let redis: Redis;
  let n = 0;
  const fresh = () => `e${++n}`;
  const expiries = (queue: string) => queueRedisKeys(prefix, queue).expiries;
  const ids = (count: number) => Array.from({ length: count }, (_, i) => `t${i}`);

  beforeAll(async () => {
    app = await createLockApp({
      keyPrefix: prefix,
      queue: { backoffMs: 0, keepCompleted: { ageMs: 0, count: 0 } },
    });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  it('drops the entries of tasks a worker completed (acks of a batch in one call)', async () => {
    const q = fresh();
    expect(await queues.enqueue(q, ids(200), { expiresInMs: MONTH })).toBe(200);
    expect(await redis.zcard(expiries(q))).toBe(200);
    let done = 0;
    const worker = queues.process(
      q,
      () => {
        done++;
      },
      { concurrency: 20 },
    );
    try {
      await waitFor('200 completed', () => done === 200);
      await waitFor('no task leased', async () => (await queues.stats(q)).leased === 0);
    } finally {
      await worker.close();
    }
    expect(await redis.zcard(expiries(q))).toBe(0);
    expect(await redis.hlen(queueRedisKeys(prefix, q).info)).toBe(0);
  });

  it('keeps the entry of a task that waits again (retry, release) and drops it when it ends: ack, dead, cancelled', async () => {
    const q = fresh();
    await queues.enqueue(q, ['acked', 'retried', 'released', 'dead', 'cancelled'], {
      expiresInMs: MONTH,
    });
    const leased = new Map((await queues.claim(q, 5)).map((t) => [t.id, t]));
    expect(leased.size).toBe(5);
    // A leased task keeps its entry: it may wait again.
    expect(await redis.zcard(expiries(q))).toBe(5);

    expect(await queues.ack(leased.get('acked')!, 'ok')).toBe(true);
    expect(await queues.nack(leased.get('retried')!, { delayMs: 60_000, maxAttempts: 5 })).toBe(
      'retried',
    );
    expect(await queues.release(leased.get('released')!)).toBe(true);
    expect(await queues.nack(leased.get('dead')!, { maxAttempts: 1 })).toBe('dead');
    expect(await queues.cancel(q, 'cancelled')).toBe('signalled');
    expect(await queues.nack(leased.get('cancelled')!, { maxAttempts: 5 })).toBe('cancelled');

    expect((await redis.zrange(expiries(q), 0, -1)).sort()).toEqual(['released', 'retried']);
    expect(await queues.get(q, 'retried')).toMatchObject({ state: 'delayed' });
    expect(await queues.get(q, 'released')).toMatchObject({ state: 'ready' });
  });

  it('indexes a dead task moved back by requeueDead again: it waits, so it ends expired on time', async () => {
    const q = fresh();
    await queues.enqueue(q, 'late', { expiresInMs: 300 });
    await queues.enqueue(q, 'plain');
    const leased = await queues.claim(q, 2);
    for (const task of leased) expect(await queues.nack(task, { maxAttempts: 1 })).toBe('dead');
    expect(await redis.zcard(expiries(q))).toBe(0);
    expect(await queues.requeueDead(q)).toBe(2);
    expect(await redis.zrange(expiries(q), 0, -1)).toEqual(['late']);
    // No worker leases it: the sweep of a claim on the paused queue ends it expired once its
    // deadline passed (and forgets it: keepCompleted 0), the other task waiting on.
    await queues.pause(q);
    await waitFor('late expired', async () => {
      await queues.claim(q, 1);
      return (await queues.get(q, 'late')) === undefined;
    });
    expect(await redis.zcard(expiries(q))).toBe(0);
    expect(await queues.get(q, 'plain')).toMatchObject({ state: 'ready' });
  });

  it('drops the entry of a waiting task that is cancelled or removed', async () => {
    const q = fresh();
    await queues.enqueue(q, ['cancelled', 'removed', 'delayed'], { expiresInMs: MONTH });
    await queues.enqueue(q, 'later', { expiresInMs: MONTH, delayMs: 60_000 });
    expect(await redis.zcard(expiries(q))).toBe(4);
    expect(await queues.cancel(q, 'cancelled')).toBe('cancelled');
    expect(await queues.remove(q, 'removed')).toBe(true);
    expect(await queues.remove(q, 'later')).toBe(true);
    expect(await redis.zrange(expiries(q), 0, -1)).toEqual(['delayed']);
  });

  it('drops the entries of tasks taken with pop and dequeue', async () => {
    const q = fresh();
    await queues.enqueue(q, ids(10), { expiresInMs: MONTH });
    expect(await queues.pop(q, 9)).toHaveLength(9);
    expect(await redis.zcard(expiries(q))).toBe(1);
    const [top] = await queues.top(q, 1);
    expect(await queues.dequeue(q, top.id, top.score)).toBe(true);
    expect(await redis.zcard(expiries(q))).toBe(0);
  });

  it('drops the entries of drained tasks, ready and delayed', async () => {
    const q = fresh();
    // More than one drain script call takes (1,000).
    await queues.enqueue(q, ids(1_000), { expiresInMs: MONTH });
    await queues.enqueue(
      q,
      Array.from({ length: 500 }, (_, i) => `u${i}`),
      { expiresInMs: MONTH },
    );
    await queues.enqueue(q, ['d1', 'd2'], { expiresInMs: MONTH, delayMs: 60_000 });
    expect(await redis.zcard(expiries(q))).toBe(1_502);
    // Ready ones only: the delayed ones keep theirs.
    expect(await queues.drain(q)).toBe(1_500);
    expect((await redis.zrange(expiries(q), 0, -1)).sort()).toEqual(['d1', 'd2']);
    expect(await queues.drain(q, { delayed: true })).toBe(2);
    expect(await redis.zcard(expiries(q))).toBe(0);
  });
});
