import type { INestApplicationContext } from '@nestjs/common';
import { metrics } from '@opentelemetry/api';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { LockService, QueueService } from '../../lib';
import { exited, lineFrom, spawnTs } from '../support/child';
import {
  deferred,
  createLockApp,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitFor,
  waitForLine,
  waitForLocalWaiters,
} from '../support/helpers';
import { OnDemandReader } from '../support/metric-reader';

describe('OpenTelemetry: handoffs, waiters and queue gauges (in-memory reader)', () => {
  const reader = new OnDemandReader();
  const provider = new MeterProvider({ readers: [reader] });
  const prefix = uniquePrefix('gauges');
  const redis = redisClient();
  let app: INestApplicationContext;

  beforeAll(async () => {
    metrics.setGlobalMeterProvider(provider);
    // One local handoff in a row while another process waits, then the lock goes to the line.
    app = await createLockApp({ keyPrefix: prefix, maxLocalHandoffs: 1 });
  });
  afterAll(async () => {
    await app.close();
    await provider.shutdown();
    metrics.disable();
    redis.disconnect();
  });

  /** Values of metric `name`, as `attributes JSON -> value`. */
  const values = async (name: string) =>
    new Map([...(await reader.points(name))].map(([k, p]) => [k, p.value]));

  it('counts local and remote handoffs and shows the callers waiting, by label', async () => {
    const locks = app.get(LockService);
    const key = 'crowd';
    const o = { label: 'crowd', waitMs: 30_000 };
    const first = await locks.acquire(key, o);
    // Another process stands in the lock's line behind our holder.
    const other = spawnTs('test/fixtures/cohort-child.ts', [], {
      REDIS_URL: testRedisUrl(),
      PREFIX: prefix,
      KEY: key,
      MODE: 'park',
      CALLERS: '1',
    });
    await lineFrom(other, /^parked$/, 60_000);
    await waitForLine(redis, prefix, key, 1, 30_000);
    // Three callers of ours wait in the local cohort.
    const order: number[] = [];
    const callers = [1, 2, 3].map((n) => locks.withLock(key, () => void order.push(n), o));
    await waitForLocalWaiters(locks, key, 3);
    expect((await values('redis_lock.lock.waiters')).get('{"lock":"crowd"}')).toBe(3);

    // first -> 1 (local); 1 -> the other process (bound reached); it -> 2 (remote); 2 -> 3 (local).
    await first.release();
    await Promise.all(callers);
    expect(await exited(other)).toBe(0);
    expect(order).toEqual([1, 2, 3]);
    const handoffs = await values('redis_lock.lock.handoffs');
    expect(handoffs.get('{"lock":"crowd","kind":"local"}')).toBe(2);
    expect(handoffs.get('{"lock":"crowd","kind":"remote"}')).toBe(1);
    expect(handoffs.size).toBe(2);
    // Nobody waits any more: 0 (not the last value seen).
    expect([...(await values('redis_lock.lock.waiters'))]).toEqual([['{"lock":"crowd"}', 0]]);
  }, 90_000); // a child process starts (ts-node): slow on a loaded machine

  it('reports the exact tasks by state and the oldest ready age of queues with workers here', async () => {
    const queues = app.get(QueueService);
    const q = `${prefix}jobs`;
    const idle = `${prefix}no-worker`;
    await queues.enqueue(idle, 'x');
    const gate = deferred();
    const worker = queues.process(
      q,
      async (task) => {
        if (task.id === 'bad') throw new Error('always');
        await gate.promise;
      },
      { concurrency: 1, maxAttempts: 1 },
    );
    await queues.enqueue(q, 'bad');
    await waitFor('the bad task to die', async () => (await queues.stats(q)).dead === 1);
    await queues.enqueue(q, 'a');
    await waitFor('a to be leased', async () => (await queues.stats(q)).leased === 1);
    await queues.enqueue(q, ['b', 'c']);
    await queues.enqueue(q, 'd', { delayMs: 60_000 });

    const tasks = await values('redis_lock.queue.tasks');
    const state = (s: string) => tasks.get(JSON.stringify({ queue: q, state: s }));
    expect([state('ready'), state('delayed'), state('leased'), state('dead')]).toEqual([
      2, 1, 1, 1,
    ]);
    // Only queues with a worker in this process are read.
    expect(tasks.size).toBe(4);
    const age = await values('redis_lock.queue.oldest_ready.age');
    expect([...age.keys()]).toEqual([JSON.stringify({ queue: q })]);
    expect(age.get(JSON.stringify({ queue: q }))).toEqual(expect.any(Number));

    gate.resolve();
    await waitFor('a, b and c to finish', async () => {
      const s = await queues.stats(q);
      return s.ready + s.leased === 0;
    });
    await worker.close();
    // Its worker is gone, the queue is still read: the gauges show now, not the last value seen.
    const after = await values('redis_lock.queue.tasks');
    expect(after.get(JSON.stringify({ queue: q, state: 'ready' }))).toBe(0);
    expect(after.get(JSON.stringify({ queue: q, state: 'delayed' }))).toBe(1);
  });
});
