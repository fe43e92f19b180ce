import 'reflect-metadata';
import { Agent } from 'node:http';
import type { ChildProcess } from 'node:child_process';
import type { PostgresServer } from '../../scripts/postgres-server';
import { createSampleApp } from '../../sample/sample-app';
import { SampleConfig } from '../../sample/config/sample-config';
import { OrdersDatabase } from '../../sample/database/orders-database';
import type { SaleStatus } from '../../sample/flash-sale/flash-sale.dto';
import { exited, lineFrom, spawnTs } from '../support/child';
import { sleep, testRedisUrl, uniquePrefix } from '../support/helpers';
import { buyAll, countBy, followOrders } from './support/buyers';
import {
  createDatabase,
  describeWithPostgres,
  queryRows,
  startTestPostgres,
} from './support/postgres';
import { sendJson, startSample, type RunningSample } from './support/sample-app';

/** Whether `agent` has a request to `url`'s origin in flight: a socket to it that is in use. */
function inFlightTo(agent: Agent, url: string): boolean {
  const { hostname, port } = new URL(url);
  return Object.entries(agent.sockets).some(
    ([name, sockets]) => name.startsWith(`${hostname}:${port}:`) && (sockets?.length ?? 0) > 0,
  );
}

/** Rows of a sale in the database: how many, and how many distinct buyers. */
async function rowsOf(url: string, sku: string): Promise<{ rows: number; buyers: number }> {
  const [counts] = await queryRows<{ rows: number; buyers: number }>(
    url,
    'SELECT count(*)::int AS rows, count(DISTINCT user_id)::int AS buyers FROM orders WHERE sku = $1',
    [sku],
  );
  return counts;
}

describeWithPostgres('sample: flash sale with its orders in a real PostgreSQL', () => {
  let postgres: PostgresServer;
  let agent: Agent;

  beforeAll(async () => {
    postgres = await startTestPostgres();
    agent = new Agent({ keepAlive: true, maxSockets: 100 });
  });

  afterAll(async () => {
    agent?.destroy();
    await postgres?.destroy();
  });

  async function statusOf(url: string, sku: string): Promise<SaleStatus> {
    const answer = await sendJson<SaleStatus>(agent, 'GET', `${url}/flash-sales/${sku}`);
    if (answer.status !== 200) throw new Error(`status answered ${answer.status}`);
    return answer.body;
  }

  async function openSale(url: string, sku: string, stock: number): Promise<void> {
    const answer = await sendJson(agent, 'POST', `${url}/flash-sales`, { sku, stock, price: 99 });
    expect(answer.status).toBe(201);
  }

  it('sells 400 units to 2,500 buyers on 2 instances, one SIGKILLed mid-sale: exactly 400 rows, 400 distinct buyers, every accepted order created', async () => {
    const databaseUrl = await createDatabase(postgres, 'killed_instance');
    const keyPrefix = uniquePrefix('sample-pg-kill');
    const child: ChildProcess = spawnTs('sample/main.ts', [], {
      REDIS_URL: testRedisUrl(),
      DATABASE_URL: databaseUrl,
      KEY_PREFIX: keyPrefix,
      PORT: '0',
    });
    const [a, line] = await Promise.all([
      startSample({ keyPrefix, databaseUrl }),
      lineFrom(child, /sample listening on http:\/\/\S+,/, 90_000),
    ]);
    const bUrl = /(http:\/\/[^\s,]+),/.exec(line)![1];
    try {
      await openSale(a.url, 'drone', 400);
      let killed = false;
      let sold = 0;
      let soldAtKill = 0;
      const buyers = Array.from({ length: 2_500 }, (_, i) => `buyer-${i}`);
      // Half the buyers go to the child instance until it dies, then every retry goes to a. It
      // dies at the first answer from the 120th sale on, seen by the buyers as it is answered,
      // at which a request to the child is in flight (a poll of the sale's status could see 120
      // only after the sale had ended, with no request left to cut; and at a given answer, the
      // child's buyers may all be pausing before a retry).
      const selling = buyAll(
        agent,
        (i) => (i % 2 && !killed ? bUrl : a.url),
        'drone',
        buyers,
        100,
        (status) => {
          if (status === 202) sold++;
          if (sold < 120 || killed || !inFlightTo(agent, bUrl)) return;
          killed = true;
          soldAtKill = sold;
          child.kill('SIGKILL');
        },
      );
      const outcomes = await selling;
      expect(killed).toBe(true);
      await exited(child);

      const statuses = countBy(outcomes.flatMap((o) => o.statuses));
      const unexpected = Object.keys(statuses).filter(
        (s) => !['202', '409', '410', '423', '503'].includes(s),
      );
      expect(unexpected).toEqual([]);
      const accepted = outcomes.filter((o) => o.orderId !== undefined);
      expect(accepted).toHaveLength(400);
      expect(new Set(accepted.map((o) => o.userId)).size).toBe(400);
      // The kill was mid-sale, with a request to the child in flight (the trigger's condition):
      // sales went on after it. Whether that request's answer was cut depends on whether it had
      // reached the parent's socket before the kill (CI on c8f1c9b saw none cut once), so the
      // requests that got no answer are reported, not required.
      expect(soldAtKill).toBeGreaterThanOrEqual(120);
      expect(soldAtKill).toBeLessThan(400);
      console.log(
        `kill at sale ${soldAtKill}; requests without an answer: ${outcomes.reduce((n, o) => n + o.dropped, 0)}`,
      );

      const views = await followOrders(
        agent,
        a.url,
        accepted.map((o) => o.orderId!),
      );
      expect(countBy(views.map((v) => v.state))).toEqual({ created: 400 });
      expect(views.map((v) => v.userId).sort()).toEqual(accepted.map((o) => o.userId).sort());
      expect(await rowsOf(databaseUrl, 'drone')).toEqual({ rows: 400, buyers: 400 });
      expect(await statusOf(a.url, 'drone')).toEqual({
        sku: 'drone',
        stock: 0,
        sold: 400,
        orders: 400,
        pending: 0,
      });
    } finally {
      child.kill('SIGKILL');
      await a.app.close();
    }
  }, 150_000);

  it('keeps selling while PostgreSQL is stopped for 5 s: orders say pending, then exactly one row per unit sold', async () => {
    const databaseUrl = await createDatabase(postgres, 'stopped_database');
    const a: RunningSample = await startSample({
      keyPrefix: uniquePrefix('sample-pg-stop'),
      databaseUrl,
    });
    try {
      await openSale(a.url, 'kettle', 150);
      const buyers = Array.from({ length: 600 }, (_, i) => `buyer-${i}`);
      const first = await buyAll(agent, () => a.url, 'kettle', buyers.slice(0, 50), 10);
      await postgres.stop();
      const during = await buyAll(agent, () => a.url, 'kettle', buyers.slice(50, 150), 20);
      const pendingOrder = during.find((o) => o.orderId !== undefined)!.orderId!;
      const view = await sendJson(agent, 'GET', `${a.url}/orders/${pendingOrder}`);
      expect(view.status).toBe(200);
      expect(view.body).toMatchObject({ orderId: pendingOrder, state: 'pending', fence: null });
      // The scenario's outage: the database stays down for 5 s while buyers keep buying.
      await sleep(5_000);
      await postgres.restart();
      const after = await buyAll(agent, () => a.url, 'kettle', buyers.slice(150), 50);

      const outcomes = [...first, ...during, ...after];
      const accepted = outcomes.filter((o) => o.orderId !== undefined);
      expect(accepted).toHaveLength(150);
      expect(
        countBy(outcomes.flatMap((o) => o.statuses).filter((s) => s !== 202 && s !== 410)),
      ).toEqual({});
      const views = await followOrders(
        agent,
        a.url,
        accepted.map((o) => o.orderId!),
        30_000,
      );
      expect(countBy(views.map((v) => v.state))).toEqual({ created: 150 });
      expect(await rowsOf(databaseUrl, 'kettle')).toEqual({ rows: 150, buyers: 150 });
      expect(await statusOf(a.url, 'kettle')).toMatchObject({ stock: 0, sold: 150, orders: 150 });
    } finally {
      await a.app.close();
    }
  }, 120_000);

  it('applies the schema once when 8 instances start at once on an empty database (no "already exists")', async () => {
    const databaseUrl = await createDatabase(postgres, 'schema_race');
    const databases = Array.from(
      { length: 8 },
      () => new OrdersDatabase(new SampleConfig({ databaseUrl })),
    );
    try {
      const outcomes = await Promise.allSettled(databases.map((db) => db.onModuleInit()));
      expect(outcomes.filter((o) => o.status === 'rejected')).toEqual([]);
      const [table] = await queryRows<{ n: number }>(
        databaseUrl,
        "SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'orders'",
      );
      expect(table.n).toBe(1);
    } finally {
      await Promise.all(databases.map((db) => db.onApplicationShutdown()));
    }
  });

  it('fails fast when DATABASE_URL is unreachable at start, naming it without its password', async () => {
    const closed = postgres.port;
    const url = `postgres://shop:s3cr3t-pw@127.0.0.1:${closed}/nowhere_db`;
    await postgres.stop();
    try {
      const app = await createSampleApp(
        { redisUrl: testRedisUrl(), keyPrefix: uniquePrefix('sample-pg-down'), databaseUrl: url },
        { logger: false, abortOnError: false },
      );
      const err = (await app.init().then(
        () => undefined,
        (e: unknown) => e,
      )) as Error;
      await app.close().catch(() => undefined);
      expect(err).toBeInstanceOf(Error);
      expect(err.message).toContain(
        `DATABASE_URL postgres://shop:***@127.0.0.1:${closed}/nowhere_db`,
      );
      expect(err.message).not.toContain('s3cr3t-pw');
      expect(JSON.stringify(err)).not.toContain('s3cr3t-pw');
    } finally {
      await postgres.restart();
    }
  });
});
