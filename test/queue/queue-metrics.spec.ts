import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { QueueError, QueueService, UnrecoverableTaskError } from '../../lib';
import {
  QueueMetrics,
  metricsDayKey,
  runTimeCode,
  runTimeOfCode,
} from '../../lib/queue/metrics/queue-metrics';
import { QUEUE_SCRIPTS } from '../../lib/queue/queue-scripts';
import { RedactingLogger } from '../../lib/redaction/redacting-logger';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';

const MINUTE = 60_000;
const DAY = 86_400_000;

describe('QueueService.metrics: per-minute history of every queue', () => {
  const prefix = uniquePrefix('queue-metrics');
  let app: INestApplicationContext;
  let queues: QueueService;
  let connection: RedisLockConnection;
  let redis: Redis;
  let n = 0;
  const fresh = () => `m${++n}`;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix, queue: { backoffMs: 0 } });
    queues = app.get(QueueService);
    connection = app.get(RedisLockConnection);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  /** A recorder on the module's connection with a clock the test moves. */
  const recorder = (clock: { now: number }) =>
    new QueueMetrics(
      connection,
      (q) => queues.store.keys(q),
      new RedactingLogger('test'),
      () => clock.now,
    );
  const recordCalls = () => {
    const run = jest.spyOn(connection, 'run');
    return {
      count: () =>
        run.mock.calls.filter(([script]) => script === QUEUE_SCRIPTS.recordMetrics).length,
      restore: () => run.mockRestore(),
    };
  };

  it('counts completed, failed (retried), dead, expired and cancelled tasks of a worker, with run-time p50/p95', async () => {
    const q = fresh();
    const tries = new Map<string, number>();
    const worker = queues.process(
      q,
      async (t) => {
        const tried = (tries.get(t.id) ?? 0) + 1;
        tries.set(t.id, tried);
        if (t.id.startsWith('flaky') && tried === 1) throw new Error('once');
        if (t.id.startsWith('bad')) throw new UnrecoverableTaskError('no');
        await new Promise((r) => setTimeout(r, t.id === 'slow' ? 200 : 10));
      },
      { concurrency: 20, maxAttempts: 3 },
    );
    await queues.enqueue(
      q,
      Array.from({ length: 18 }, (_, i) => `ok${i}`),
    );
    await queues.enqueue(q, ['slow', 'flaky1', 'flaky2', 'bad1']);
    await queues.enqueue(q, ['late1', 'late2'], { expiresAt: 1 });
    await queues.enqueue(q, 'waiting', { delayMs: 600_000 });
    expect(await queues.cancel(q, 'waiting')).toBe('cancelled');
    await waitFor('21 completed', async () => (await queues.stats(q)).completed === 21, 10_000);
    await worker.close();
    // Nothing is written before the minute ends (or the app shuts down)...
    expect(await queues.metrics(q)).toEqual([]);
    await queues.store.metrics.flush(true);
    const points = await queues.metrics(q);
    const total = (key: 'completed' | 'failed' | 'dead' | 'expired' | 'cancelled') =>
      points.reduce((sum, p) => sum + p[key], 0);
    expect({
      completed: total('completed'),
      failed: total('failed'),
      dead: total('dead'),
      expired: total('expired'),
      cancelled: total('cancelled'),
    }).toEqual({ completed: 21, failed: 2, dead: 1, expired: 2, cancelled: 1 });
    for (const p of points) expect(p.time % MINUTE).toBe(0);
    // A range ending far in the future (or the widest one) still holds the kept days.
    for (const range of [
      { from: Date.now() - 3_600_000, to: Date.now() + 16 * 86_400_000 },
      { from: 0, to: new Date('2100-01-01') },
      { from: 0, to: Number.MAX_SAFE_INTEGER },
    ]) {
      expect(await queues.metrics(q, range)).toEqual(points);
    }
    const withTimes = points.filter((p) => p.p50Ms !== undefined);
    expect(withTimes.length).toBeGreaterThan(0);
    for (const p of withTimes) {
      // 10 ms handlers (run times >= 10 ms): the median within its 10 % bucket and above 9 ms.
      expect(p.p50Ms).toBeGreaterThanOrEqual(9);
      expect(p.p95Ms).toBeGreaterThanOrEqual(p.p50Ms!);
    }
  });

  it("obliterate deletes the history for good: this instance's minute not written yet is dropped", async () => {
    const q = fresh();
    const worker = queues.process(q, async () => undefined);
    await queues.enqueue(q, ['a', 'b', 'c']);
    await waitFor('3 completed', async () => (await queues.stats(q)).completed === 3, 10_000);
    await worker.close();
    await queues.obliterate(q);
    await queues.store.metrics.flush(true);
    expect(await queues.metrics(q)).toEqual([]);
  });

  it('writes one script call per queue per flush however many tasks ended, and merges the instances of one minute', async () => {
    const q = fresh();
    const start = Math.floor(Date.now() / DAY) * DAY + 10 * MINUTE;
    const clock = { now: start };
    const a = recorder(clock);
    const b = recorder(clock);
    for (let i = 0; i < 10_000; i++) a.count(q, 'completed', 1, 100);
    for (let i = 0; i < 300; i++) a.count(q, 'failed');
    for (let i = 0; i < 30_000; i++) b.count(q, 'completed', 1, 1_000);
    clock.now += MINUTE;
    a.count(q, 'dead', 4);
    const calls = recordCalls();
    // Minute 10 ended: one call per instance; minute 11 is still counted in memory.
    await a.flush();
    await b.flush();
    expect(calls.count()).toBe(2);
    await a.flush();
    expect(calls.count()).toBe(2);
    // Minutes with completed tasks only take the compact record; a later write decodes it.
    a.count(q, 'completed', 5, 50);
    clock.now += MINUTE;
    await a.flush();
    expect(calls.count()).toBe(3);
    a.count(q, 'completed', 2, 50);
    clock.now += MINUTE;
    await a.flush();
    calls.restore();
    const points = await queues.metrics(q, { from: start - MINUTE, to: start + 5 * MINUTE });
    expect(points.map((p) => [p.time, p.completed, p.failed, p.dead])).toEqual([
      [start, 40_000, 300, 0],
      [start + MINUTE, 5, 0, 4],
      [start + 2 * MINUTE, 2, 0, 0],
    ]);
    expect(points[2].p50Ms).toBe(runTimeOfCode(runTimeCode(50)));
    // 100 ms from a, 1,000 ms from b, weighted 1:3 by completed tasks (within the 10 % buckets).
    const merged = runTimeOfCode(Math.round((runTimeCode(100) + 3 * runTimeCode(1_000)) / 4));
    expect(points[0].p50Ms).toBe(merged);
    expect(points[0].p95Ms).toBe(merged);
    expect(points[1].p50Ms).toBe(runTimeOfCode(runTimeCode(50)));
    await a.close();
    await b.close();
  });

  it('writes by itself once the minute ended: one call per queue with activity, then no timer', async () => {
    const [q1, q2] = [fresh(), fresh()];
    // 200 ms before the end of a minute (of the recorder's clock).
    const minuteStart = Math.floor(Date.now() / MINUTE) * MINUTE;
    const clock = { now: minuteStart + MINUTE - 200 };
    const r = recorder(clock);
    const calls = recordCalls();
    for (let i = 0; i < 1_000; i++) r.count(q1, 'completed', 1, 5);
    r.count(q2, 'cancelled', 3);
    clock.now += 200;
    await waitFor('the timer to write both queues', () => calls.count() === 2, 10_000);
    calls.restore();
    const [p1] = await queues.metrics(q1, { from: minuteStart, to: minuteStart + MINUTE });
    expect(p1).toMatchObject({ time: minuteStart, completed: 1_000 });
    expect(
      (await queues.metrics(q2, { from: minuteStart, to: minuteStart + MINUTE }))[0],
    ).toMatchObject({ cancelled: 3 });
    // Nothing left: no timer keeps the process awake.
    expect((r as unknown as { timer?: NodeJS.Timeout }).timer).toBeUndefined();
    await r.close();
  });

  it('keeps 14 days of busy minutes in at most 150 KB, and every key expires', async () => {
    const q = fresh();
    const today = Math.floor(Date.now() / DAY);
    const clock = { now: (today - 14) * DAY };
    const r = recorder(clock);
    // Every minute of 14 days + today: a busy queue (hundreds to thousands of tasks a minute, a
    // few retries, now and then a dead, expired or cancelled task; run times 20 ms to 2 s).
    let i = 0;
    // To the end of today: the most the keys hold at once (15 days, the oldest expiring).
    while (clock.now < (today + 1) * DAY) {
      // Run times of 20 tasks (p50 and p95 apart), the rest of the minute's completed at once.
      const base = 20 + ((i * 104729) % 2_000);
      for (let t = 0; t < 20; t++) r.count(q, 'completed', 1, base + t * t * 5);
      r.count(q, 'completed', 180 + ((i * 7919) % 4_000));
      if (i % 2 === 0) r.count(q, 'failed', 1 + (i % 5));
      if (i % 10 === 0) r.count(q, 'dead');
      if (i % 15 === 0) r.count(q, 'expired', 3);
      if (i % 30 === 0) r.count(q, 'cancelled');
      clock.now += MINUTE;
      i++;
      if (i % 1440 === 0) await r.flush();
    }
    await r.flush();
    const keys: string[] = [];
    for (let day = today - 15; day <= today; day++) {
      const key = metricsDayKey(queues.store.keys(q), day);
      if ((await redis.exists(key)) === 1) keys.push(key);
    }
    let bytes = 0;
    for (const key of keys) {
      bytes += Number(await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
      const ttl = await redis.pttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(15 * DAY);
    }
    console.log(`${i} busy minutes (${keys.length} day keys): ${bytes} bytes`);
    expect(keys.length).toBe(15);
    expect(bytes).toBeLessThanOrEqual(150 * 1024);
    const points = await queues.metrics(q, { from: (today - 14) * DAY, to: (today + 1) * DAY });
    expect(points).toHaveLength(15 * 1440);
    expect(points[0]).toMatchObject({ time: (today - 14) * DAY, completed: 200, failed: 1 });
    expect(points[1]).toMatchObject({ time: (today - 14) * DAY + MINUTE, failed: 0 });
    await r.close();
  }, 60_000);

  it('resolves [] for a range that starts after tomorrow, without a round trip', async () => {
    const q = fresh();
    const call = jest.spyOn(connection, 'call');
    try {
      for (const days of [2, 30]) {
        const from = Date.now() + days * 86_400_000;
        expect(await queues.metrics(q, { from, to: from + 86_400_000 })).toEqual([]);
      }
      expect(call.mock.calls.filter(([what]) => what === 'MGET (queue metrics)')).toHaveLength(0);
    } finally {
      call.mockRestore();
    }
  });

  it('refuses a bad range, naming the option', async () => {
    const q = fresh();
    for (const [options, name] of [
      [{ from: 'yesterday' }, 'from'],
      [{ to: -1 }, 'to'],
      [{ from: 2, to: 1 }, 'from'],
      [{ since: 1 }, 'since'],
    ] as const) {
      const err = (await queues.metrics(q, options as never).catch((e: unknown) => e)) as Error;
      expect(err).toBeInstanceOf(QueueError);
      expect(err.message).toContain(`'${name}'`);
    }
  });
});
