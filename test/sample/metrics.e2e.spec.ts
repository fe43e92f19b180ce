import 'reflect-metadata';
import request from 'supertest';
import type { PostgresServer } from '../../scripts/postgres-server';
import { uniquePrefix, waitFor } from '../support/helpers';
import { createDatabase, describeWithPostgres, startTestPostgres } from './support/postgres';
import { startSample, type RunningSample } from './support/sample-app';

// The orders are rows in PostgreSQL: a real one (the embedded engine can't load inside Jest).
describeWithPostgres('sample: Prometheus /metrics (OpenTelemetry exporter)', () => {
  let postgres: PostgresServer;
  let sample: RunningSample;

  beforeAll(async () => {
    postgres = await startTestPostgres();
    const databaseUrl = await createDatabase(postgres, 'metrics');
    sample = await startSample({ keyPrefix: uniquePrefix('sample-metrics'), databaseUrl });
  });
  afterAll(async () => {
    await sample?.app.close();
    await postgres?.destroy();
  });

  it('shows the lock and queue series after a few buys and the orders the workers made', async () => {
    await request(sample.url)
      .post('/flash-sales')
      .send({ sku: 'mug', stock: 3, price: 5 })
      .expect(201);
    for (const userId of ['u1', 'u2', 'u3', 'u4']) {
      await request(sample.url).post('/flash-sales/mug/buy').send({ userId });
    }
    await waitFor(
      '3 orders',
      async () => {
        const res = await request(sample.url).get('/flash-sales/mug/orders');
        return res.status === 200 && res.body.length === 3;
      },
      15_000,
      50,
    );
    const text = (await request(sample.url).get('/metrics').expect(200)).text;
    const value = (series: string) => {
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.split(' ').pop());
    };
    const scope = 'otel_scope_name="nestjs-redis-lock"';
    // The sale's creation and the 3 successful buys took the stock lock (the 4th buyer was
    // refused by the sale.guards before locking); labelled by the @WithLock template.
    const stock = 'lock="stock:<0>"';
    expect(value(`redis_lock_lock_acquire_wait_count{${stock},outcome="acquired",${scope}}`)).toBe(
      4,
    );
    expect(value(`redis_lock_lock_held_count{${stock},${scope}}`)).toBe(4);
    expect(value(`redis_lock_queue_tasks_completed_total{queue="orders",${scope}}`)).toBe(3);
    expect(
      value(`redis_lock_queue_task_run_count{queue="orders",outcome="completed",${scope}}`),
    ).toBe(3);
    expect(value(`redis_lock_queue_task_wait_count{queue="orders",${scope}}`)).toBe(3);
    expect(text).toContain('# TYPE redis_lock_lock_acquire_wait histogram');
    // Gauges, read at the scrape: the orders queue (workers in this app) is empty, nobody waits.
    for (const state of ['ready', 'delayed', 'leased', 'dead']) {
      expect(value(`redis_lock_queue_tasks{queue="orders",state="${state}",${scope}}`)).toBe(0);
    }
    expect(value(`redis_lock_queue_oldest_ready_age{queue="orders",${scope}}`)).toBe(0);
    expect(value(`redis_lock_lock_waiters{${stock},${scope}}`)).toBe(0);
    expect(text).toContain('# TYPE redis_lock_queue_tasks gauge');
    expect(text).not.toContain('stock:mug'); // never the raw key
  });
});
