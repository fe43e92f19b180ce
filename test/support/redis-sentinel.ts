import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { waitFor } from './helpers';
import {
  freePort,
  redisServerBinary,
  spawnUntilReady,
  startRedisServer,
  type RedisServer,
} from './redis-server';

/** A master, its replica and three `redis-sentinel` processes watching them. */
export interface RedisSentinelProcesses {
  /** The name the sentinels monitor the master under. */
  readonly name: string;
  /** `{ host, port }` of each sentinel: the ioredis `sentinels` option. */
  readonly sentinels: Array<{ host: string; port: number }>;
  /** The master and the replica as started (their roles swap on failover). */
  readonly servers: readonly RedisServer[];
  /** The port the sentinels report as the master now. */
  currentMaster(): Promise<number>;
  /**
   * SIGKILLs the current master; resolves with the new master's port once every sentinel reports
   * it and it says `role:master`.
   */
  killMaster(): Promise<number>;
  /** Stops the sentinels and the servers. */
  stop(): Promise<void>;
}

/** Options of `startRedisSentinel`. */
export interface RedisSentinelSetup {
  /** `sentinel down-after-milliseconds`. @default 1000 */
  downAfterMs?: number;
  /** `sentinel failover-timeout`. @default 5000 */
  failoverTimeoutMs?: number;
}

const HOST = '127.0.0.1';

async function ask(port: number, ...args: Array<string | number>): Promise<unknown> {
  const client = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2_000,
    commandTimeout: 2_000,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await client.call(String(args[0]), ...args.slice(1));
  } finally {
    client.disconnect();
  }
}

function startSentinel(port: number, config: string): Promise<ChildProcess> {
  return spawnUntilReady(
    redisServerBinary('redis-sentinel'),
    [config],
    '+monitor master',
    `redis-sentinel on port ${port}`,
  );
}

/**
 * Starts a master and one replica (redis-server) and three redis-sentinel processes (generated
 * config files in a temp dir, quorum 2), and resolves once every sentinel knows the replica and
 * the two other sentinels.
 */
export async function startRedisSentinel(
  setup: RedisSentinelSetup = {},
): Promise<RedisSentinelProcesses> {
  const name = 'mymaster';
  const master = await startRedisServer();
  const replica = await startRedisServer(['--replicaof', HOST, String(master.port)]);
  const servers = [master, replica];
  const dir = mkdtempSync(join(tmpdir(), 'redis-lock-sentinel-'));
  const sentinels: Array<{ port: number; process: ChildProcess }> = [];
  const stop = async () => {
    await Promise.all(
      sentinels.map(
        (s) =>
          new Promise<void>((resolve) => {
            if (s.process.exitCode !== null || s.process.signalCode !== null) return resolve();
            s.process.once('exit', () => resolve());
            s.process.kill('SIGKILL');
          }),
      ),
    );
    await Promise.all(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', () => {
    for (const s of sentinels) s.process.kill('SIGKILL');
  });

  try {
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const config = join(dir, `sentinel-${i}.conf`);
      writeFileSync(
        config,
        [
          `port ${port}`,
          `bind ${HOST}`,
          'protected-mode no',
          'daemonize no',
          `dir ${dir}`,
          `sentinel monitor ${name} ${HOST} ${master.port} 2`,
          `sentinel down-after-milliseconds ${name} ${setup.downAfterMs ?? 1_000}`,
          `sentinel failover-timeout ${name} ${setup.failoverTimeoutMs ?? 5_000}`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      sentinels.push({ port, process: await startSentinel(port, config) });
    }
    await waitFor(
      'the sentinels to know the replica and each other',
      async () => {
        const link = (await ask(replica.port, 'INFO', 'replication')) as string;
        if (!link.includes('master_link_status:up')) return false;
        for (const s of sentinels) {
          const replicas = (await ask(s.port, 'SENTINEL', 'REPLICAS', name)) as unknown[];
          const others = (await ask(s.port, 'SENTINEL', 'SENTINELS', name)) as unknown[];
          if (replicas.length !== 1 || others.length !== 2) return false;
        }
        return true;
      },
      30_000,
      100,
    );
  } catch (err) {
    await stop();
    throw err;
  }

  const reported = async (port: number) =>
    Number(((await ask(port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as string[])[1]);
  const currentMaster = () => reported(sentinels[0].port);
  return {
    name,
    sentinels: sentinels.map((s) => ({ host: HOST, port: s.port })),
    servers,
    currentMaster,
    async killMaster() {
      const old = await currentMaster();
      const server = servers.find((s) => s.port === old)!;
      server.process.kill('SIGKILL');
      await server.stop();
      const next = servers.find((s) => s !== server)!.port;
      await waitFor(
        `sentinels to promote the replica on port ${next}`,
        async () => {
          for (const s of sentinels)
            if ((await reported(s.port).catch(() => 0)) !== next) return false;
          const role = (await ask(next, 'INFO', 'replication').catch(() => '')) as string;
          return role.includes('role:master');
        },
        30_000,
        50,
      );
      return next;
    },
    stop,
  };
}
