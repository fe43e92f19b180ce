import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { metrics } from '@opentelemetry/api';
import { MeterProvider, type DataPoint, type Histogram } from '@opentelemetry/sdk-metrics';
import { LockService, QueueService, RedisLockOptionsError, WithLock } from '../../lib';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';
import { OnDemandReader } from '../support/metric-reader';

@Injectable()
class Orders {
  @WithLock('order:<0>', { waitMs: 1_000 })
  async settle(id: string): Promise<string> {
    return id;
  }
}

describe('OpenTelemetry, optional', () => {
  it('records nothing (and builds no instruments) without the API package or without an SDK', () => {
    jest.isolateModules(() => {
      jest.doMock('@opentelemetry/api', () => {
        throw new Error("Cannot find module '@opentelemetry/api'");
      });
      const otel = require('../../lib/observability/otel');
      expect(otel.otelApi).toBeUndefined();
      expect(otel.libraryMeter()).toBeUndefined();
      expect(otel.libraryTracer()).toBeUndefined();
      const { LockMetrics } = require('../../lib/observability/metrics');
      expect(() => new LockMetrics().acquired('x', 'acquired', 1)).not.toThrow();
      jest.dontMock('@opentelemetry/api');
    });
    jest.isolateModules(() => {
      const otel = require('../../lib/observability/otel');
      expect(otel.otelApi).toBeDefined();
      expect(otel.libraryMeter()).toBeUndefined();
      expect(otel.libraryTracer()).toBeUndefined();
    });
  });
});

describe('OpenTelemetry metrics (in-memory reader)', () => {
  const reader = new OnDemandReader();
  const provider = new MeterProvider({ readers: [reader] });
  const prefix = uniquePrefix('metrics');
  const redis = redisClient();
  let app: INestApplicationContext;

  beforeAll(async () => {
    // Registered before the module starts: instruments are made from the global provider.
    metrics.setGlobalMeterProvider(provider);
    app = await createLockApp({ keyPrefix: prefix }, [Orders]);
  });
  afterAll(async () => {
    await app.close();
    await provider.shutdown();
    metrics.disable();
    redis.disconnect();
  });

  const points = (name: string) => reader.points(name);
  const count = (p?: DataPoint<unknown>) => (p ? (p.value as Histogram).count : 0);

  it('records lock waits by outcome, hold times and losses, labelled by label or template', async () => {
    const locks = app.get(LockService);
    for (let i = 0; i < 3; i++)
      await (await locks.acquire(`stock:${i}`, { label: 'stock' })).release();
    const held = await locks.acquire('stock:9', { label: 'stock' });
    expect(await locks.tryAcquire('stock:9', { label: 'stock' })).toBeNull();
    await expect(locks.acquire('stock:9', { label: 'stock', waitMs: 20 })).rejects.toThrow();
    await held.release();
    await app.get(Orders).settle('a1');
    await app.get(Orders).settle('b2');
    const lost = await locks.acquire('raw-key-42');
    await redis.set(`${prefix}lock:{raw-key-42}`, 'someone-else');
    await lost.extend();

    await expect(locks.acquire('x', { label: '' })).rejects.toThrow(RedisLockOptionsError);
    await expect(locks.acquire('x', { label: 7 as never })).rejects.toThrow(/'label'/);

    const wait = await points('redis_lock.lock.acquire.wait');
    expect(count(wait.get('{"lock":"stock","outcome":"acquired"}'))).toBe(4);
    expect(count(wait.get('{"lock":"stock","outcome":"timeout"}'))).toBe(2);
    expect(count(wait.get('{"lock":"order:<0>","outcome":"acquired"}'))).toBe(2);
    expect(count(wait.get('{"lock":"(unlabelled)","outcome":"acquired"}'))).toBe(1);
    expect(wait.size).toBe(4);

    const hold = await points('redis_lock.lock.held');
    expect(count(hold.get('{"lock":"stock"}'))).toBe(4);
    expect(count(hold.get('{"lock":"order:<0>"}'))).toBe(2);
    expect(hold.size).toBe(2);

    const losses = await points('redis_lock.lock.lost');
    expect([...losses].map(([a, p]) => [a, p.value])).toEqual([
      ['{"lock":"(unlabelled)","reason":"taken"}', 1],
    ]);
  });

  it('records task outcomes, run and wait times per queue', async () => {
    const queues = app.get(QueueService);
    const q = `${prefix}work`;
    const worker = queues.process(
      q,
      async (task) => {
        if (task.id === 'flaky' && task.attempt === 1) throw new Error('once');
        if (task.id === 'bad') throw new Error('always');
      },
      { maxAttempts: 2, backoffMs: 1, concurrency: 2 },
    );
    await queues.enqueue(q, ['ok1', 'ok2', 'flaky', 'bad']);
    await waitFor('every task to finish or die', async () => {
      const s = await queues.stats(q);
      return s.dead === 1 && s.ready + s.delayed + s.leased === 0;
    });
    await worker.close();
    const value = async (name: string) => (await points(name)).get(`{"queue":"${q}"}`)?.value;
    expect(await value('redis_lock.queue.tasks.completed')).toBe(3);
    expect(await value('redis_lock.queue.tasks.retried')).toBe(2);
    expect(await value('redis_lock.queue.tasks.dead')).toBe(1);
    const run = await points('redis_lock.queue.task.run');
    expect(count(run.get(`{"queue":"${q}","outcome":"completed"}`))).toBe(3);
    expect(count(run.get(`{"queue":"${q}","outcome":"failed"}`))).toBe(3);
    expect(count((await points('redis_lock.queue.task.wait')).get(`{"queue":"${q}"}`))).toBe(6);
  });
});
