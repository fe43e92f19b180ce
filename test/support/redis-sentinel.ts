import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from './helpers';
import { askNode as ask, NODE_HOST } from './redis-node';
import {
  freePort,
  redisServerBinary,
  spawnUntilReady,
  startRedisServer,
  stopProcess,
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

/** `stop` of every setup started by this module and not stopped yet. */
const running = new Set<() => Promise<void>>();

/**
 * Stops every Sentinel setup still running (sentinels and servers). Inside a Jest test file a
 * `process.once('exit')` hook never runs: this runs after every test file instead.
 */
export async function stopAllRedisSentinels(): Promise<void> {
  const stops = [...running];
  running.clear();
  await Promise.all(stops.map((stop) => stop()));
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
  let replica: RedisServer;
  try {
    replica = await startRedisServer(['--replicaof', NODE_HOST, String(master.port)]);
  } catch (err) {
    await master.stop();
    throw err;
  }
  const servers = [master, replica];
  const dir = mkdtempSync(join(tmpdir(), 'redis-lock-sentinel-'));
  const sentinels: Array<{ port: number; process: ChildProcess }> = [];
  const stop = async () => {
    running.delete(stop);
    await Promise.all(sentinels.map((s) => stopProcess(s.process)));
    await Promise.all(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  running.add(stop);

  try {
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const config = join(dir, `sentinel-${i}.conf`);
      writeFileSync(
        config,
        [
          `port ${port}`,
          `bind ${NODE_HOST}`,
          'protected-mode no',
          'daemonize no',
          `dir ${dir}`,
          `sentinel monitor ${name} ${NODE_HOST} ${master.port} 2`,
          `sentinel down-after-milliseconds ${name} ${setup.downAfterMs ?? 1_000}`,
          `sentinel failover-timeout ${name} ${setup.failoverTimeoutMs ?? 5_000}`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      sentinels.push({ port, process: await startSentinel(port, config) });
    }
    const ready = async () => {
      const link = (await ask(replica.port, 'INFO', 'replication')) as string;
      if (!link.includes('master_link_status:up')) return false;
      for (const s of sentinels) {
        const replicas = (await ask(s.port, 'SENTINEL', 'REPLICAS', name)) as unknown[];
        const others = (await ask(s.port, 'SENTINEL', 'SENTINELS', name)) as unknown[];
        if (replicas.length !== 1 || others.length !== 2) return false;
      }
      return true;
    };
    // A node that does not answer yet is not ready yet (not a reason to give up).
    await waitFor(
      'the sentinels to know the replica and each other',
      () => ready().catch(() => false),
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
    sentinels: sentinels.map((s) => ({ host: NODE_HOST, port: s.port })),
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
