import 'reflect-metadata';
import { Logger, type INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  LockService,
  QueueService,
  RedisLockOptionsError,
  type RedisLockModuleOptions,
} from '../../lib';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { createLockApp, testRedisUrl, uniquePrefix } from '../support/helpers';
import { askNode, NODE_HOST } from '../support/redis-node';
import { startRedisServer, stopAllRedisServers, type RedisServer } from '../support/redis-server';
import { startRedisCluster, type RedisClusterProcesses } from '../support/redis-cluster';
import { startRedisSentinel, type RedisSentinelProcesses } from '../support/redis-sentinel';

/** The warnings the module logged while `options` booted (and the app, closed again). */
async function bootWarnings(options: RedisLockModuleOptions): Promise<string[]> {
  const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  let app: INestApplicationContext | undefined;
  try {
    app = await createLockApp({ keyPrefix: uniquePrefix('evict'), ...options });
    return warn.mock.calls.map((call) => String(call[0]));
  } finally {
    await app?.close();
    warn.mockRestore();
  }
}

const aboutPolicy = (warnings: string[]) => warnings.filter((w) => /maxmemory-policy/.test(w));

describe('Boot check of maxmemory-policy (evictionPolicy)', () => {
  let lru: RedisServer;
  let volatile: RedisServer[];
  let renamed: RedisServer;

  beforeAll(async () => {
    lru = await startRedisServer(['--maxmemory-policy', 'allkeys-lru']);
    volatile = await Promise.all(
      [0, 1, 2].map(() => startRedisServer(['--maxmemory-policy', 'volatile-lru'])),
    );
    // CONFIG renamed away, as on many managed services: the policy must be read from INFO.
    renamed = await startRedisServer([
      '--maxmemory-policy',
      'allkeys-lru',
      '--rename-command',
      'CONFIG',
      '',
    ]);
  }, 60_000);
  afterAll(() => stopAllRedisServers());

  it('warns once for a master with allkeys-lru, naming the policy, the master and the fix', async () => {
    const warnings = aboutPolicy(await bootWarnings({ redis: lru.url }));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain("maxmemory-policy 'allkeys-lru'");
    expect(warnings[0]).toContain(`${NODE_HOST}:${lru.port}`);
    expect(warnings[0]).toContain('set maxmemory-policy to noeviction');
  });

  it('warns once per master: each of three quorum nodes with volatile-lru (the queue Redis is noeviction)', async () => {
    const warnings = aboutPolicy(
      await bootWarnings({ redis: testRedisUrl(), nodes: volatile.map((s) => s.url) }),
    );
    expect(warnings).toHaveLength(3);
    for (const server of volatile) {
      expect(warnings.filter((w) => w.includes(`${NODE_HOST}:${server.port}`))).toEqual([
        expect.stringContaining("maxmemory-policy 'volatile-lru'"),
      ]);
    }
  });

  it("with evictionPolicy: 'fail' the start fails with RedisLockOptionsError naming policy and master", async () => {
    const start = createLockApp({ redis: lru.url, evictionPolicy: 'fail' });
    await expect(start).rejects.toBeInstanceOf(RedisLockOptionsError);
    await expect(start).rejects.toThrow(
      new RegExp(`master ${NODE_HOST}:${lru.port} with maxmemory-policy allkeys-lru'$`),
    );
    await expect(start).rejects.toThrow(
      /expected masters with maxmemory-policy noeviction \(evictionPolicy: 'fail'\)/,
    );
    // A quorum node is a master too.
    await expect(
      createLockApp({ nodes: volatile.map((s) => s.url), evictionPolicy: 'fail' }),
    ).rejects.toThrow(/invalid option 'nodes'.*maxmemory-policy volatile-lru/);
  });

  it('says nothing about a master with noeviction, nor with evictionPolicy: ignore', async () => {
    expect(aboutPolicy(await bootWarnings({ redis: testRedisUrl() }))).toEqual([]);
    expect(aboutPolicy(await bootWarnings({ redis: lru.url, evictionPolicy: 'ignore' }))).toEqual(
      [],
    );
  });

  it('reads the policy from INFO memory where CONFIG is renamed away', async () => {
    const warnings = aboutPolicy(await bootWarnings({ redis: renamed.url }));
    expect(warnings).toEqual([expect.stringContaining("maxmemory-policy 'allkeys-lru'")]);
  });

  it('reads it from INFO memory for an ACL user without +config, and says it could not be checked when INFO is refused too', async () => {
    const user = (name: string, ...rules: string[]) =>
      askNode(lru.port, 'ACL', 'SETUSER', name, 'on', '>pw', '~*', '&*', '+@all', ...rules);
    await user('noconfig', '-config');
    await user('neither', '-config', '-info');
    const url = (user: string) => `redis://${user}:pw@${NODE_HOST}:${lru.port}`;
    expect(aboutPolicy(await bootWarnings({ redis: url('noconfig') }))).toEqual([
      expect.stringContaining("maxmemory-policy 'allkeys-lru'"),
    ]);
    const unchecked = aboutPolicy(await bootWarnings({ redis: url('neither') }));
    expect(unchecked).toHaveLength(1);
    expect(unchecked[0]).toMatch(
      new RegExp(`maxmemory-policy of Redis master ${NODE_HOST}:${lru.port} could not be checked`),
    );
    expect(unchecked[0]).toMatch(
      /CONFIG GET maxmemory-policy failed: NOPERM.*INFO memory failed: NOPERM/,
    );
    // Not known to be wrong: not fatal either.
    await bootWarnings({ redis: url('neither'), evictionPolicy: 'fail' });
  });
});

describe('What eviction breaks (why the check exists): maxmemory 2mb, allkeys-lru', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedisServer(['--maxmemory', '2mb', '--maxmemory-policy', 'allkeys-lru']);
  });
  afterAll(() => server.stop());

  it("a cache filling memory evicts a held lock (a second grant, the holder's signal unaborted) and queued tasks", async () => {
    const prefix = uniquePrefix('evicted');
    const options = { redis: server.url, keyPrefix: prefix, evictionPolicy: 'ignore' as const };
    const [a, b] = [await createLockApp(options), await createLockApp(options)];
    const cache = new Redis(server.url);
    try {
      const held = await a.get(LockService).acquire('order:1', { ttlMs: 600_000 });
      const queues = a.get(QueueService);
      await queues.enqueue('jobs', ['t1', 't2', 't3'], { payload: { n: 1 } });
      const lockKey = lockRedisKeys(prefix, 'order:1').value;
      const dueKey = queueRedisKeys(prefix, 'jobs').due;
      // EXISTS does not touch a key's LRU clock.
      const present = async () => (await cache.exists(lockKey)) + (await cache.exists(dueKey));
      // Another client caches until both keys are gone (bounded: 20,000 writes of 1 KB).
      const value = 'x'.repeat(1_000);
      for (let i = 0; i < 20_000 && (await present()) > 0; i += 100) {
        const batch = cache.pipeline();
        for (let j = i; j < i + 100; j++) batch.set(`cache:${j}`, value);
        await batch.exec();
      }
      expect(await present()).toBe(0);
      const second = await b.get(LockService).tryAcquire('order:1');
      expect(second).not.toBeNull();
      expect(held.signal.aborted).toBe(false);
      // The 3 tasks are gone from every state.
      expect(await queues.stats('jobs')).toMatchObject({ ready: 0, delayed: 0, leased: 0 });
      expect(await queues.claim('jobs', 3)).toEqual([]);
      await second?.release();
    } finally {
      cache.disconnect();
      await a.close();
      await b.close();
    }
  });
});

describe('Boot check of maxmemory-policy on Sentinel and Cluster', () => {
  let sentinel: RedisSentinelProcesses;
  let cluster: RedisClusterProcesses;

  beforeAll(async () => {
    [sentinel, cluster] = await Promise.all([
      startRedisSentinel(),
      startRedisCluster({ replicas: 0 }),
    ]);
  }, 120_000);
  afterAll(async () => {
    await sentinel?.stop();
    await cluster?.stop();
  });

  it("warns for Sentinel's master, naming it", async () => {
    const master = sentinel.servers[0].port;
    await askNode(master, 'CONFIG', 'SET', 'maxmemory-policy', 'volatile-lru');
    const warnings = aboutPolicy(
      await bootWarnings({ redis: { sentinels: sentinel.sentinels, name: sentinel.name } }),
    );
    expect(warnings).toEqual([
      expect.stringMatching(
        new RegExp(
          `'mymaster' \\(${NODE_HOST}:${master}, via Sentinel\\) has maxmemory-policy 'volatile-lru'`,
        ),
      ),
    ]);
  });

  it('warns once for each Cluster master', async () => {
    const masters = cluster.servers.map((s) => s.port);
    await Promise.all(
      masters.map((port) => askNode(port, 'CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lfu')),
    );
    const warnings = aboutPolicy(await bootWarnings({ redis: { cluster: cluster.startupNodes } }));
    expect(warnings).toHaveLength(masters.length);
    for (const port of masters) {
      expect(warnings.filter((w) => w.includes(`${NODE_HOST}:${port} has`))).toHaveLength(1);
    }
  });
});
