import 'reflect-metadata';
import type { Redis } from 'ioredis';
import { QueueError, QueueService } from '../../lib';
import { createLockApp, redisClient, sleep, uniquePrefix, waitFor } from '../support/helpers';

describe('QueueService deduplication ({ deduplication: { id, ttlMs? } })', () => {
  const prefix = uniquePrefix('queue-dedup');
  let app: Awaited<ReturnType<typeof createLockApp>>;
  let queues: QueueService;
  let redis: Redis;
  let n = 0;
  const fresh = () => `dedup-${++n}`;
  const key = (q: string, part: string) => `${prefix}queue:{${q}}:${part}`;
  /** The queue's `deduplicated` events as [refused id, kept id]. */
  const deduplicated = async (q: string) =>
    (await redis.xrange(key(q, 'events'), '-', '+'))
      .map(([, f]) => Object.fromEntries(f.flatMap((v, i) => (i % 2 ? [] : [[v, f[i + 1]]]))))
      .filter((e) => e.t === 'deduplicated')
      .map((e) => [e.i, e.k]);

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  it('adds exactly one of 200 concurrent producers; the others get 0 and a deduplicated event', async () => {
    const q = fresh();
    const added = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        queues.enqueue(q, `t${i}`, { payload: i, deduplication: { id: 'user:1' } }),
      ),
    );
    expect(added.filter((a) => a === 1)).toHaveLength(1);
    expect(added.filter((a) => a === 0)).toHaveLength(199);
    const winner = `t${added.indexOf(1)}`;
    expect((await queues.stats(q)).ready).toBe(1);
    const events = await deduplicated(q);
    expect(events).toHaveLength(199);
    expect(events.every(([, kept]) => kept === winner)).toBe(true);
    expect(new Set(events.map(([refused]) => refused)).size).toBe(199);
  });

  it('holds while the task is queued or running, and lets the next in once it finished', async () => {
    const q = fresh();
    const d = { deduplication: { id: 'sync' } };
    expect(await queues.enqueue(q, 'a', d)).toBe(1);
    expect(await queues.enqueue(q, 'b', d)).toBe(0);
    const [task] = await queues.claim(q, 1);
    expect(await queues.enqueue(q, 'b', d)).toBe(0);
    await queues.ack(task);
    expect(await queues.enqueue(q, 'b', d)).toBe(1);
    // dead, cancelled and removed tasks release it too
    const [b] = await queues.claim(q, 1);
    expect(await queues.nack(b, { maxAttempts: 1 })).toBe('dead');
    expect(await queues.enqueue(q, 'c', d)).toBe(1);
    expect(await queues.cancel(q, 'c')).toBe('cancelled');
    expect(await queues.enqueue(q, 'e', d)).toBe(1);
    expect(await queues.remove(q, 'e')).toBe(true);
    expect(await queues.enqueue(q, 'f', d)).toBe(1);
    // Other deduplication ids and plain enqueues are independent.
    expect(await queues.enqueue(q, 'g', { deduplication: { id: 'other' } })).toBe(1);
    expect(await queues.enqueue(q, 'h')).toBe(1);
    expect((await queues.stats(q)).ready).toBe(3);
  });

  it('with ttlMs, holds for ttlMs after the add even once the task completed, then lets the next in', async () => {
    const q = fresh();
    const d = { deduplication: { id: 'throttle', ttlMs: 300 } };
    expect(await queues.enqueue(q, 'a', d)).toBe(1);
    const [task] = await queues.claim(q, 1);
    await queues.ack(task);
    expect(await queues.enqueue(q, 'b', d)).toBe(0);
    await sleep(350);
    expect(await queues.enqueue(q, 'b', d)).toBe(1);
    expect(await queues.enqueue(q, 'c', d)).toBe(0);
  });

  it('works with delayMs, priority and group, and costs a plain enqueue nothing', async () => {
    const q = fresh();
    expect(await queues.enqueue(q, 'a', { delayMs: 60_000, deduplication: { id: 'x' } })).toBe(1);
    expect(await queues.enqueue(q, 'b', { priority: 2, deduplication: { id: 'x' } })).toBe(0);
    expect(await queues.enqueue(q, 'c', { group: 'g', deduplication: { id: 'y' } })).toBe(1);
    expect(await queues.enqueue(q, 'd', { group: 'g', deduplication: { id: 'y' } })).toBe(0);
    expect(await redis.hlen(key(q, 'dedup'))).toBe(2);
    await queues.enqueue(q, 'plain');
    expect(await redis.hlen(key(q, 'dedup'))).toBe(2);
  });

  it('drops stale entries as it goes: 500 finished holders leave a small hash behind', async () => {
    const q = fresh();
    for (let i = 0; i < 500; i += 100) {
      await Promise.all(
        Array.from({ length: 100 }, (_, j) =>
          queues.enqueue(q, `t${i + j}`, { deduplication: { id: `d${i + j}` } }),
        ),
      );
      const leased = await queues.claim(q, 100);
      await Promise.all(leased.map((t) => queues.ack(t)));
    }
    // The last 100 were live when added (the sweeps meanwhile dropped most of the earlier ones).
    expect(await redis.hlen(key(q, 'dedup'))).toBeGreaterThanOrEqual(100);
    // Each deduplicated enqueue looks at 4 random entries: all 500 are stale now.
    for (let i = 0; i < 600; i++) {
      await queues.enqueue(q, `u${i}`, { deduplication: { id: `live${i % 5}` } });
    }
    const left = await redis.hlen(key(q, 'dedup'));
    expect(left).toBeLessThan(60);
    expect(await queues.stats(q)).toMatchObject({ ready: 5 });
  });

  describe('keepLastIfActive', () => {
    const keep = (id = 'deploy') => ({ deduplication: { id, keepLastIfActive: true } });

    it('keeps the last call made while the holder runs and adds it when the holder completes', async () => {
      const q = fresh();
      expect(await queues.enqueue(q, 'a', { payload: 1, ...keep() })).toBe(1);
      const [a] = await queues.claim(q, 1);
      const calls = await Promise.all(
        Array.from({ length: 50 }, (_, i) => queues.enqueue(q, `k${i}`, { payload: i, ...keep() })),
      );
      expect(calls.every((c) => c === 0)).toBe(true);
      expect(await queues.stats(q)).toMatchObject({ ready: 0, leased: 1 });
      expect(await redis.hlen(key(q, 'dnext'))).toBe(1);
      const kept = JSON.parse((await redis.hget(key(q, 'dnext'), 'a'))!) as { i: string };
      expect(await queues.ack(a)).toBe(true);
      expect(await queues.stats(q)).toMatchObject({ ready: 1, leased: 0, completed: 1 });
      const [next] = await queues.claim(q, 5);
      expect(next.id).toBe(kept.i);
      expect(next.payload).toBe(Number(kept.i.slice(1)));
      expect(await redis.exists(key(q, 'dnext'))).toBe(0);
      // The added task holds the id now: a call while it runs is kept in turn.
      expect(await queues.enqueue(q, 'z', { payload: 'z', ...keep() })).toBe(0);
      await queues.ack(next);
      expect((await queues.claim(q, 5)).map((t) => t.id)).toEqual(['z']);
    });

    it('deduplicates as usual while the holder waits; keeps across retries; adds when the holder dies', async () => {
      const q = fresh();
      expect(await queues.enqueue(q, 'a', keep())).toBe(1);
      expect(await queues.enqueue(q, 'b', keep())).toBe(0);
      expect(await redis.exists(key(q, 'dnext'))).toBe(0);
      let [a] = await queues.claim(q, 1);
      expect(await queues.enqueue(q, 'c', keep())).toBe(0);
      expect(await queues.nack(a)).toBe('retried');
      expect(await queues.stats(q)).toMatchObject({ ready: 1 });
      [a] = await queues.claim(q, 1);
      expect(a.id).toBe('a');
      expect(await queues.nack(a, { maxAttempts: 2 })).toBe('dead');
      expect((await queues.claim(q, 5)).map((t) => t.id)).toEqual(['c']);
    });

    it('drops the kept call with a holder removed while waiting between retries', async () => {
      const q = fresh();
      await queues.enqueue(q, 'a', keep());
      const [a] = await queues.claim(q, 1);
      await queues.enqueue(q, 'b', keep());
      await queues.nack(a);
      expect(await queues.remove(q, 'a')).toBe(true);
      expect(await redis.exists(key(q, 'dnext'))).toBe(0);
      expect(await queues.enqueue(q, 'c', keep())).toBe(1);
    });

    it('runs at most one task per id at a time under a worker, newer data each time', async () => {
      const q = fresh();
      let running = 0;
      let peak = 0;
      const seen: unknown[] = [];
      const worker = queues.process(
        q,
        async (task) => {
          running++;
          peak = Math.max(peak, running);
          seen.push(task.payload);
          await sleep(20);
          running--;
        },
        { concurrency: 5 },
      );
      try {
        for (let i = 0; i < 30; i++) {
          await queues.enqueue(q, `t${i}`, { payload: i, ...keep() });
          await sleep(3);
        }
        await waitFor('idle', async () => {
          const st = await queues.stats(q);
          return st.ready === 0 && st.leased === 0 && running === 0;
        });
      } finally {
        await worker.close();
      }
      expect(peak).toBe(1);
      // Each run has newer data than the one before (a call made while the holder waited, not
      // ran, was deduplicated as usual, so not every payload runs).
      expect(seen).toEqual([...seen].sort((x, y) => (x as number) - (y as number)));
      expect(new Set(seen).size).toBe(seen.length);
    });
  });

  it('refuses bad input before sending anything', async () => {
    const q = fresh();
    const bad = async (options: unknown, argument: string, ids: unknown = 'x') => {
      const err = await queues.enqueue(q, ids as string, options as never).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(QueueError);
      expect((err as QueueError).argument).toBe(argument);
    };
    await bad({ deduplication: 'x' }, 'deduplication');
    await bad({ deduplication: { id: '' } }, 'deduplication.id');
    await bad({ deduplication: { id: 7 } }, 'deduplication.id');
    await bad({ deduplication: { id: 'x'.repeat(513) } }, 'deduplication.id');
    await bad({ deduplication: { id: 'a', ttlMs: 0 } }, 'deduplication.ttlMs');
    await bad({ deduplication: { id: 'a', ttlMs: 1.5 } }, 'deduplication.ttlMs');
    await bad({ deduplication: { id: 'a', extend: true } }, 'deduplication.extend');
    await bad({ deduplication: { id: 'a' } }, 'deduplication', ['x', 'y']);
    const k = 'deduplication.keepLastIfActive';
    await bad({ deduplication: { id: 'a', keepLastIfActive: 1 } }, k);
    await bad({ deduplication: { id: 'a', keepLastIfActive: true, ttlMs: 5 } }, k);
    await bad({ priority: 1, deduplication: { id: 'a', keepLastIfActive: true } }, k);
    await bad({ group: 'g', deduplication: { id: 'a', keepLastIfActive: true } }, k);
    expect(await redis.keys(`${prefix}queue:{${q}}:*`)).toEqual([]);
  });
});
