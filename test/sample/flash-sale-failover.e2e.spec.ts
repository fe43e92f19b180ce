import 'reflect-metadata';
import { appendFileSync } from 'node:fs';
import { clusterKeySlot } from '../../lib/redis/cluster-slot';
import type { PostgresServer } from '../../scripts/postgres-server';
import type { SampleConfigValues } from '../../sample/config/sample-config';
import { SampleRedis } from '../../sample/redis/sample-redis';
import { uniquePrefix, waitFor } from '../support/helpers';
import { startRedisCluster, type RedisClusterProcesses } from '../support/redis-cluster';
import { askNode } from '../support/redis-node';
import { startRedisSentinel } from '../support/redis-sentinel';
import {
  failoverTable,
  runFailoverRound,
  type FailoverRoundReport,
  type FailoverRoundSetup,
} from './support/failover-round';
import { createDatabase, describeWithPostgres, startTestPostgres } from './support/postgres';
import { startSample, type RunningSample } from './support/sample-app';

// Buyers who do not retry, a Redis master SIGKILLed mid-sale: every unit taken must end as an
// order or back on sale within a bound after Redis recovers (issue 34, item 7). CI runs one
// round of each kind; the long measurement of docs/faults.md runs more:
//   FAILOVER_ROUNDS=10 FAILOVER_REPORT=/tmp/failover.md npx jest -w 1 test/sample/flash-sale-failover.e2e.spec.ts
const ROUNDS = Number(process.env.FAILOVER_ROUNDS ?? '1');
const REPORT = process.env.FAILOVER_REPORT;
/** The hold of the instances under test (`saleHoldMs`): units unsettled this long are settled. */
const HOLD_MS = 3_000;
/** The bound after recovery within which every unit must be settled. */
const SETTLE_WITHIN_MS = 45_000;
const ROUND = { stock: 300, buyers: 900, settleWithinMs: SETTLE_WITHIN_MS } as const;
/** Longest a round may take: the sale, the failover, the settling. */
const ROUND_TIMEOUT_MS = 120_000;

type Round = { kind: string } & FailoverRoundReport;

/** Every round's figures must be perfect: nothing stranded or oversold, every 202 an order. */
function expectSettled(round: Round): void {
  expect(round).toMatchObject({
    stranded: 0,
    oversold: 0,
    acceptedNotCreated: 0,
    settledMs: expect.any(Number),
    noAnswer: {},
  });
  // Buyers answered 503 naming their order learn where it ended: created or back on sale.
  expect(Object.keys(round.unconfirmed).filter((s) => s !== 'created' && s !== 'released')).toEqual(
    [],
  );
  // Redis trouble is a 503, never a 500.
  expect(
    Object.keys(round.statuses).filter((s) => !['202', '409', '410', '423', '503'].includes(s)),
  ).toEqual([]);
}

/** Starts two sample instances on one PostgreSQL database with `redis` settings. */
async function startInstances(
  keyPrefix: string,
  databaseUrl: string,
  redis: Partial<SampleConfigValues>,
): Promise<RunningSample[]> {
  const config = { keyPrefix, databaseUrl, saleHoldMs: HOLD_MS, ...redis };
  return Promise.all([startSample(config), startSample(config)]);
}

function report(title: string, rounds: readonly Round[]): void {
  if (rounds.length === 0) return;
  const text = `\n### ${title}\n\n${failoverTable(rounds)}\n`;
  console.log(text);
  if (REPORT) appendFileSync(REPORT, text);
}

/** A Redis deployment under test: the sample's settings for it, and how to stop it. */
interface Deployment {
  redis: Partial<SampleConfigValues>;
  stop(): Promise<void>;
}

/** One kind of master kill on deployment `D`: its name and how to do it during the sale `sku`. */
type Kill<D> = [kind: string, fail: (deployment: D, sku: string) => Promise<void>];

describeWithPostgres('sample: a Redis master killed mid-sale strands no unit', () => {
  let postgres: PostgresServer;

  beforeAll(async () => {
    postgres = await startTestPostgres();
  }, 60_000);

  afterAll(async () => {
    await postgres?.destroy();
  });

  /**
   * Starts the deployment and 2 sample instances on it, then runs `ROUNDS` rounds of each kill
   * (one test per kind), and reports the rounds under `title`.
   */
  function describeFailovers<D extends Deployment>(
    title: string,
    start: () => Promise<D>,
    kills: ReadonlyArray<Kill<D>>,
  ): void {
    describe(`on ${title}, 2 instances`, () => {
      let deployment: D | undefined;
      let apps: RunningSample[] = [];
      let databaseUrl: string;
      const rounds: Round[] = [];

      beforeAll(async () => {
        deployment = await start();
        databaseUrl = await createDatabase(postgres, uniquePrefix('failover').replace(/\W/g, '_'));
        apps = await startInstances(uniquePrefix('sample-failover'), databaseUrl, deployment.redis);
      }, 90_000);

      afterAll(async () => {
        report(title, rounds);
        await Promise.all(apps.map((a) => a.app.close()));
        await deployment?.stop();
      });

      for (const [kind, fail] of kills) {
        it(
          `kill of the master of the ${kind}: every unit ordered or back on sale, 0 oversold`,
          async () => {
            const redis = apps[0].app.get(SampleRedis);
            for (let i = 0; i < ROUNDS; i++) {
              const sku = `${kind.replace(/\W+/g, '-')}-${i}`;
              const setup: FailoverRoundSetup = {
                ...ROUND,
                urls: apps.map((a) => a.url),
                redis,
                databaseUrl,
                sku,
                fail: () => fail(deployment!, sku),
              };
              const round = { kind, ...(await runFailoverRound(setup)) };
              rounds.push(round);
              expectSettled(round);
            }
          },
          ROUND_TIMEOUT_MS * ROUNDS,
        );
      }
    });
  }

  /** SIGKILLs the master of `slot`, waits for its replica's promotion, restarts it (a replica). */
  async function killMasterOf(cluster: RedisClusterProcesses, slot: number): Promise<void> {
    const master = await cluster.masterOfSlot(slot);
    await cluster.killMaster(master);
    await cluster.restart(master);
    await cluster.waitHealthy();
  }

  describeFailovers(
    'a 6-node Cluster (3 masters, 3 replicas)',
    async () => {
      const cluster = await startRedisCluster();
      return Object.assign(cluster, { redis: { redisClusterNodes: cluster.startupNodes } });
    },
    [
      // The stock lock `stock:<sku>`: the library's keys `<prefix>lock:{stock:<sku>}…`.
      ["lock's slot", (c, sku) => killMasterOf(c, clusterKeySlot(`{stock:${sku}}`))],
      // The sale's data: `<prefix>sale:{<sku>}…`.
      ["sale data's slot", (c, sku) => killMasterOf(c, clusterKeySlot(`{${sku}}`))],
      // The `orders` queue: `<prefix>queue:{orders}…`.
      ["orders queue's slot", (c) => killMasterOf(c, clusterKeySlot('{orders}'))],
    ],
  );

  describeFailovers(
    'Sentinel (a master, a replica, 3 sentinels)',
    async () => {
      const sentinel = await startRedisSentinel();
      const redis = { redisSentinels: sentinel.sentinels, redisSentinelName: sentinel.name };
      return Object.assign(sentinel, { redis });
    },
    [
      [
        // SIGKILLs the master; once the sentinels promoted the replica, restarts it (it comes
        // back as a replica of the new master).
        'Sentinel set',
        async (sentinel) => {
          const old = await sentinel.currentMaster();
          const next = await sentinel.killMaster();
          await sentinel.servers.find((s) => s.port === old)!.restart();
          // Sentinel turns a master that comes back into a replica only once it has reported
          // itself a master for 8 s (4 publish periods) without being down, and it polls a
          // replica's INFO every 10 s: 10 to 20 s, more on a loaded machine (30 s was too short
          // once in CI).
          await waitFor(
            'the restarted node to replicate the new master',
            async () =>
              /connected_slaves:1/.test(String(await askNode(next, 'INFO', 'replication'))),
            60_000,
            100,
          );
        },
      ],
    ],
  );
});
