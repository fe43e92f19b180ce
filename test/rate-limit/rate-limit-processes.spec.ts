import type { ChildProcess } from 'node:child_process';
import { Cluster, Redis } from 'ioredis';
import { lineFrom, spawnTs } from '../support/child';
import { RateLimiterService } from '../../lib';
import { createLockApp, redisClient, testRedisUrl, uniquePrefix } from '../support/helpers';
import { startRedisCluster, type RedisClusterProcesses } from '../support/redis-cluster';
import { busiestWindow, readWindowLog } from '../support/window-log';

const INSTANCES = 4;
const CALLERS = 8;
const ROUNDS = 3;
const LIMIT = 20;
const WINDOW_MS = 2_000;
const RUN_MS = 5_000;

/**
 * 4 processes x 8 concurrent callers of one sliding window, 3 rounds: every admitted unit's Redis
 * time is read back from the log (`readWindowLog`), and no window of `WINDOW_MS` may hold more
 * than `LIMIT`.
 */
async function crowdRounds(
  prefix: string,
  reader: Redis | Cluster,
  connection: Record<string, string>,
): Promise<void> {
  const children: ChildProcess[] = Array.from({ length: INSTANCES }, () =>
    spawnTs('test/fixtures/rate-limit-crowd-child.ts', [], {
      PREFIX: prefix,
      ROUNDS: String(ROUNDS),
      CALLERS: String(CALLERS),
      LIMIT: String(LIMIT),
      WINDOW_MS: String(WINDOW_MS),
      RUN_MS: String(RUN_MS),
      ...connection,
    }),
  );
  try {
    await Promise.all(children.map((c) => lineFrom(c, /^ready$/, 120_000)));
    for (let round = 0; round < ROUNDS; round++) {
      const reading = readWindowLog(reader, `${prefix}rate:{crowd:${round}}`, WINDOW_MS);
      const done = children.map((c) => lineFrom(c, new RegExp(`^round ${round} `), 60_000));
      await reader.lpush(`${prefix}go:{${round}}`, ...children.map(() => 'go'));
      // 'round <n> <admitted> <refused>'
      const counts = (await Promise.all(done)).map((line) => line.split(' ').slice(2).map(Number));
      const times = await reading.stop();
      const admitted = counts.reduce((sum, [a]) => sum + a, 0);
      const refused = counts.reduce((sum, [, r]) => sum + r, 0);
      expect(times).toHaveLength(admitted);
      expect({ round, worst: busiestWindow(times, WINDOW_MS) }).toEqual({ round, worst: LIMIT });
      // The crowd slid past the limit: more than two windows' worth admitted, many refused.
      expect(admitted).toBeGreaterThan(2 * LIMIT);
      expect(refused).toBeGreaterThan(admitted);
      // Several processes were admitted: they all counted against the one limit.
      expect(counts.filter(([a]) => a > 0).length).toBeGreaterThan(1);
    }
  } finally {
    for (const c of children) c.kill('SIGKILL');
  }
}

describe('RateLimiterService across processes: the sliding window is exact', () => {
  it('4 processes x 8 concurrent callers, 3 rounds: no window of windowMs admits more than limit', async () => {
    const redis = redisClient();
    try {
      await crowdRounds(uniquePrefix('rate-procs'), redis, { REDIS_URL: testRedisUrl() });
    } finally {
      redis.disconnect();
    }
  }, 180_000);
});

describe('RateLimiterService on Redis Cluster (3 masters)', () => {
  let cluster: RedisClusterProcesses;
  let reader: Cluster;

  beforeAll(async () => {
    cluster = await startRedisCluster({ replicas: 0 });
    reader = new Cluster(cluster.startupNodes);
  }, 120_000);
  afterAll(async () => {
    reader?.disconnect();
    await cluster?.stop();
  });

  it('4 processes x 8 concurrent callers, 3 rounds: no window of windowMs admits more than limit', async () => {
    await crowdRounds(uniquePrefix('rate-cluster'), reader, {
      CLUSTER: JSON.stringify(cluster.startupNodes),
    });
  }, 240_000);

  it('consumes of one tick over keys in many slots: batched by hash tag (no CROSSSLOT), each exact', async () => {
    const prefix = uniquePrefix('rate-slots');
    const app = await createLockApp({
      redis: { cluster: cluster.startupNodes },
      keyPrefix: prefix,
    });
    try {
      const limiter = app.get(RateLimiterService);
      const o = { limit: 3, windowMs: 60_000 };
      // 12 names in (almost surely) different slots, and two sharing the slot of '{shop:1}'.
      const names = [
        ...Array.from({ length: 12 }, (_, i) => `user:${i}`),
        '{shop:1}:cart',
        '{shop:1}:pay',
      ];
      const results = await Promise.all(
        names.flatMap((name) => Array.from({ length: 5 }, () => limiter.consume(name, o))),
      );
      for (let n = 0; n < names.length; n++) {
        expect(results.slice(5 * n, 5 * n + 5).map((r) => r.allowed)).toEqual([
          true,
          true,
          true,
          false,
          false,
        ]);
      }
      expect(await reader.zcard(`${prefix}rate:{user:0}`)).toBe(3);
      expect(await reader.zcard(`${prefix}rate:{shop:1}:pay{}`)).toBe(3);
    } finally {
      await app.close();
    }
  }, 60_000);
});
