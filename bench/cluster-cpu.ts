/**
 * Client CPU of an acquire + release pair on a Redis Cluster against one Redis node: this
 * process's CPU time (`process.cpuUsage()`, user + system) per pair, for the library
 * (`LockService.acquire(key)` with the module's defaults, a try, then `release()`) and for plain
 * ioredis (`SET key token NX PX` + `DEL key`, the least any lock sends), each on a Cluster of 3
 * masters + 3 replicas (the test harness, test/support/redis-cluster.ts) and on one redis-server,
 * in the serial shape (one loop, one key) and the parallel-64 shape (64 loops, a key each, so on
 * every master). CPU time per pair depends less on what else runs on the machine than pairs/s.
 * Both targets of a cell are measured back to back, in an order that flips every round. Prints
 * per target, client and shape the median over the rounds (min–max beside it) and the median of
 * the rounds' Cluster / single-node ratios.
 *
 *   node -r ts-node/register/transpile-only bench/cluster-cpu.ts [--rounds 3] [--pairs 3000]
 *     [--client ours|ioredis] [--target cluster|single] [--shape serial|parallel-64]
 *
 * To see where the time goes, profile one cell: add `node --cpu-prof` and the three filters.
 */
import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Cluster, Redis } from 'ioredis';
import { LockService, type RedisLockModuleOptions } from '../lib';
import { startRedisServer, type RedisServer } from '../scripts/redis-server';
import { startRedisCluster, type RedisClusterProcesses } from '../test/support/redis-cluster';
import { oursApp } from './adapters/ours-app';
import { median } from './support/bench-stats';

const value = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const ROUNDS = Math.max(3, Number(value('rounds') ?? 3));
const PAIRS = Number(value('pairs') ?? 3_000);
const WARM_UP_PAIRS = 1_000;
const PARALLEL = 64;
const TARGETS = (['single', 'cluster'] as const).filter((t) => (value('target') ?? t) === t);
const CLIENTS = (['ours', 'ioredis'] as const).filter((c) => (value('client') ?? c) === c);
const SHAPES = (['serial', 'parallel-64'] as const).filter((s) => (value('shape') ?? s) === s);

type Target = (typeof TARGETS)[number];
type Client = (typeof CLIENTS)[number];
type Shape = (typeof SHAPES)[number];

/** One acquire + release on `key`. */
type Pair = (key: string) => Promise<void>;

interface Setup {
  pair: Pair;
  close(): Promise<void>;
}

async function ours(redis: RedisLockModuleOptions['redis']): Promise<Setup> {
  const app: INestApplicationContext = await oursApp({ redis, keyPrefix: 'cpu:' });
  const locks = app.get(LockService);
  return {
    pair: async (key) => {
      const lock = await locks.acquire(key);
      await lock.release();
    },
    close: () => app.close(),
  };
}

async function plain(client: Redis | Cluster): Promise<Setup> {
  let n = 0;
  return {
    pair: async (key) => {
      const k = `cpu:plain:${key}`;
      await client.set(k, `token-${n++}`, 'PX', 10_000, 'NX');
      await client.del(k);
    },
    close: async () => void client.disconnect(),
  };
}

/** Runs `pairs` pairs in `shape`; resolves with this process's CPU µs per pair. */
async function measure(pair: Pair, shape: Shape, pairs: number, tag: string): Promise<number> {
  const loops = shape === 'serial' ? 1 : PARALLEL;
  const per = Math.ceil(pairs / loops);
  const start = process.cpuUsage();
  await Promise.all(
    Array.from({ length: loops }, async (_, l) => {
      // Keys of a parallel run are spread over the slots, so over every master of the Cluster.
      const key = `${tag}:${shape}:${l}`;
      for (let i = 0; i < per; i++) await pair(key);
    }),
  );
  const used = process.cpuUsage(start);
  return (used.user + used.system) / (per * loops);
}

async function setUp(
  target: Target,
  client: Client,
  single: RedisServer,
  cluster: RedisClusterProcesses,
): Promise<Setup> {
  if (client === 'ours') {
    return ours(target === 'single' ? single.url : { cluster: cluster.startupNodes });
  }
  const connection =
    target === 'single' ? new Redis(single.url) : new Cluster(cluster.startupNodes);
  await new Promise((resolve) => connection.once('ready', resolve));
  return plain(connection);
}

async function main(): Promise<void> {
  const single = await startRedisServer();
  const cluster = await startRedisCluster();
  const setups = new Map<string, Setup>();
  const results = new Map<string, number[]>();
  const cell = (t: Target, c: Client, s: Shape) => `${t} ${c} ${s}`;
  try {
    // Every setup lives for the whole run, and the two targets of a cell are measured back to
    // back (their order flips every round): the load of the machine then changes little between
    // the two figures of a ratio.
    for (const target of TARGETS) {
      for (const client of CLIENTS) {
        const setup = await setUp(target, client, single, cluster);
        setups.set(`${target} ${client}`, setup);
        for (const shape of SHAPES) await measure(setup.pair, shape, WARM_UP_PAIRS, 'warm-up');
      }
    }
    for (let round = 0; round < ROUNDS; round++) {
      const targets = round % 2 === 0 ? TARGETS : [...TARGETS].reverse();
      for (const client of CLIENTS) {
        for (const shape of SHAPES) {
          for (const target of targets) {
            const setup = setups.get(`${target} ${client}`)!;
            const us = await measure(setup.pair, shape, PAIRS, `r${round}`);
            const key = cell(target, client, shape);
            results.set(key, [...(results.get(key) ?? []), us]);
            console.log(`round ${round + 1}/${ROUNDS} ${key}: ${us.toFixed(1)} µs/pair`);
          }
        }
      }
    }
  } finally {
    for (const setup of setups.values()) await setup.close();
    await cluster.stop();
    await single.stop();
  }
  const fmt = (xs: number[]) =>
    `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)})`;
  console.log(
    `\nclient CPU µs per acquire + release, median of ${ROUNDS} rounds of ${PAIRS} pairs`,
  );
  console.log(
    'client   shape        single node          Cluster              Cluster / single (median of the rounds)',
  );
  for (const client of CLIENTS) {
    for (const shape of SHAPES) {
      const s = results.get(cell('single', client, shape));
      const c = results.get(cell('cluster', client, shape));
      // Each round's two figures were measured back to back: the median of their ratios is
      // steadier than the ratio of the medians when the load of the machine changes.
      const ratio = s && c ? `${median(c.map((x, i) => x / s[i])).toFixed(2)}x` : '-';
      console.log(
        `${client.padEnd(8)} ${shape.padEnd(12)} ${(s ? fmt(s) : '-').padEnd(20)} ${(c ? fmt(c) : '-').padEnd(20)} ${ratio}`,
      );
    }
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
