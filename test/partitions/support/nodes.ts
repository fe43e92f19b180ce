import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { redisServerBinary, spawnUntilReady, stopProcess } from '../../../scripts/redis-server';
import { askNodeAt } from '../../support/redis-node';
import type { NetNode } from './netns';

// redis-server and redis-sentinel processes, each in its own namespace (so each has every port
// to itself: servers on 6379, sentinels on 26379).

export const REDIS_PORT = 6379;
export const SENTINEL_PORT = 26379;

/** A redis-server or redis-sentinel running in a namespace. */
export interface RedisNode {
  readonly net: NetNode;
  readonly host: string;
  readonly port: number;
  readonly url: string;
  readonly process: ChildProcess;
  /** SIGKILL (a crash). */
  kill(): Promise<void>;
  /** SIGTERM, then SIGKILL after 3 s. */
  stop(): Promise<void>;
  /**
   * Starts a stopped server again in its namespace, with its folder (a Cluster node keeps its
   * nodes.conf) and its arguments plus `extra` (e.g. `--replicaof`).
   */
  restart(extra?: readonly string[]): Promise<void>;
}

const dirs = new Set<string>();

/** Removes the nodes' temp folders (their processes are killed with their namespaces). */
export function removeNodeDirs(): void {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  dirs.clear();
}

function node(
  net: NetNode,
  port: number,
  launch: (extra: readonly string[]) => Promise<ChildProcess>,
  first: ChildProcess,
): RedisNode {
  let child = first;
  return {
    net,
    host: net.ip,
    port,
    url: `redis://${net.ip}:${port}`,
    get process() {
      return child;
    },
    async restart(extra = []) {
      child = await launch(extra);
    },
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    },
    stop: () => stopProcess(child),
  };
}

/** Starts a redis-server (no persistence) in `net`'s namespace, on its address, port 6379. */
export async function startServer(net: NetNode, args: readonly string[] = []): Promise<RedisNode> {
  const dir = mkdtempSync(join(tmpdir(), `rlp-${net.name}-`));
  dirs.add(dir);
  const launch = (extra: readonly string[]) =>
    spawnUntilReady(
      'ip',
      [
        'netns',
        'exec',
        net.ns,
        redisServerBinary(),
        '--port',
        String(REDIS_PORT),
        '--bind',
        net.ip,
        '--save',
        '',
        '--appendonly',
        'no',
        '--protected-mode',
        'no',
        '--dir',
        dir,
        ...args,
        ...extra,
      ],
      'Ready to accept connections',
      `redis-server in ${net.ns}`,
    );
  return node(net, REDIS_PORT, launch, await launch([]));
}

/** Starts a redis-sentinel in `net`'s namespace watching `master` as `name` (quorum 2). */
export async function startSentinel(
  net: NetNode,
  master: RedisNode,
  name: string,
  downAfterMs: number,
): Promise<RedisNode> {
  const dir = mkdtempSync(join(tmpdir(), `rlp-${net.name}-`));
  dirs.add(dir);
  const config = join(dir, 'sentinel.conf');
  writeFileSync(
    config,
    [
      `port ${SENTINEL_PORT}`,
      `bind ${net.ip}`,
      'protected-mode no',
      'daemonize no',
      `dir ${dir}`,
      `sentinel monitor ${name} ${master.host} ${master.port} 2`,
      `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
      `sentinel failover-timeout ${name} 5000`,
      `sentinel parallel-syncs ${name} 1`,
      '',
    ].join('\n'),
  );
  const launch = () =>
    spawnUntilReady(
      'ip',
      ['netns', 'exec', net.ns, redisServerBinary('redis-sentinel'), config],
      '+monitor master',
      `redis-sentinel in ${net.ns}`,
    );
  return node(net, SENTINEL_PORT, launch, await launch());
}

/**
 * One command to one node from the test process (root namespace), over a connection of its own:
 * never retried, bounded by 2 s (the node may be dead or cut off).
 */
export const ask = askNodeAt;

/** `INFO replication` of a node as a map, or `{}` when it does not answer. */
export async function replicationInfo(target: {
  host: string;
  port: number;
}): Promise<Record<string, string>> {
  const text = String(await ask(target, 'INFO', 'replication').catch(() => ''));
  return Object.fromEntries(
    text
      .split('\r\n')
      .filter((l) => l.includes(':'))
      .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]),
  );
}
