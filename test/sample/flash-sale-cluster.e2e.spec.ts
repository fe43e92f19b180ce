import 'reflect-metadata';
import { Agent } from 'node:http';
import { clusterKeySlot } from '../../lib/redis/cluster-slot';
import type { PostgresServer } from '../../scripts/postgres-server';
import type { SaleStatus } from '../../sample/flash-sale/flash-sale.dto';
import { uniquePrefix, waitFor } from '../support/helpers';
import { startRedisCluster, type RedisClusterProcesses } from '../support/redis-cluster';
import { buyAll, countBy, followOrders } from './support/buyers';
import {
  createDatabase,
  describeWithPostgres,
  queryRows,
  startTestPostgres,
} from './support/postgres';
import { sendJson, startSample, type RunningSample } from './support/sample-app';

describeWithPostgres('sample: flash sale on a 6-node Redis Cluster (3 masters, 3 replicas)', () => {
  let cluster: RedisClusterProcesses;
  let postgres: PostgresServer;
  let databaseUrl: string;
  let app: RunningSample;
  let agent: Agent;
  const keyPrefix = uniquePrefix('sample-cluster');

  beforeAll(async () => {
    [cluster, postgres] = await Promise.all([startRedisCluster(), startTestPostgres()]);
    databaseUrl = await createDatabase(postgres, 'cluster');
    // REDIS_CLUSTER_NODES=host:port,… in the environment; one node is enough to find the rest.
    app = await startSample({ keyPrefix, databaseUrl, redisClusterNodes: cluster.startupNodes });
    agent = new Agent({ keepAlive: true, maxSockets: 100 });
  }, 90_000);

  afterAll(async () => {
    agent?.destroy();
    await app?.app.close();
    await Promise.all([cluster?.stop(), postgres?.destroy()]);
  });

  async function statusOf(sku: string): Promise<SaleStatus | undefined> {
    const answer = await sendJson<SaleStatus>(agent, 'GET', `${app.url}/flash-sales/${sku}`);
    return answer.status === 200 ? answer.body : undefined;
  }

  it("sells 400 units to 2,500 buyers while the master of the sale's slot is SIGKILLed: 0 oversold, no 500, every 202 becomes a row", async () => {
    const opened = await sendJson(agent, 'POST', `${app.url}/flash-sales`, {
      sku: 'phone',
      stock: 400,
      price: 10,
    });
    expect(opened.status).toBe(201);
    const buyers = Array.from({ length: 2_500 }, (_, i) => `buyer-${i}`);
    const selling = buyAll(agent, () => app.url, 'phone', buyers);
    await waitFor(
      '100 units sold',
      async () => ((await statusOf('phone'))?.sold ?? 0) >= 100,
      60_000,
      10,
    );
    // Mid-sale: crash the master holding the sale's keys; a replica takes over. The crashed node
    // is started again and rejoins as a replica (what its operators would do), so that sales
    // can be replicated again.
    const master = await cluster.masterOfSlot(clusterKeySlot(`${keyPrefix}sale:{phone}`));
    await cluster.killMaster(master);
    await cluster.restart(master);
    const outcomes = await selling;

    const statuses = countBy(outcomes.flatMap((o) => o.statuses));
    // Redis trouble during the failover is a 503 (the buyer retries), never a 500.
    expect(
      Object.keys(statuses).filter((s) => !['202', '409', '410', '423', '503'].includes(s)),
    ).toEqual([]);
    const accepted = outcomes.filter((o) => o.orderId !== undefined);
    expect(new Set(accepted.map((o) => o.userId)).size).toBe(accepted.length);
    expect(new Set(accepted.map((o) => o.orderId)).size).toBe(accepted.length);
    // Nothing oversold: at most 400 accepted buyers, and every accepted order is a row.
    expect(accepted.length).toBeLessThanOrEqual(400);
    const views = await followOrders(
      agent,
      app.url,
      accepted.map((o) => o.orderId!),
    );
    expect(countBy(views.map((v) => v.state))).toEqual({ created: accepted.length });
    const [rows] = await queryRows<{ rows: number; buyers: number }>(
      databaseUrl,
      "SELECT count(*)::int AS rows, count(DISTINCT user_id)::int AS buyers FROM orders WHERE sku = 'phone'",
    );
    expect(rows).toEqual({ rows: accepted.length, buyers: accepted.length });
    const status = await statusOf('phone');
    expect(status!.sold).toBeLessThanOrEqual(400);
    expect(status!.stock + status!.sold).toBe(400);
  }, 150_000);
});
