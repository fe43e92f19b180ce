import { clusterKeySlot } from '../../../lib/redis/cluster-slot';
import { waitFor } from '../../support/helpers';
import { AppClient } from './app-client';
import { Network, type NetNode } from './netns';
import {
  ask,
  removeNodeDirs,
  replicationInfo,
  startSentinel,
  startServer,
  type RedisNode,
} from './nodes';

// The deployments under test, built in their namespaces: one Redis, Sentinel (master, replica,
// three sentinels), a Cluster (three masters, one replica for the master of the hot key), and
// three independent masters for quorum locks; plus the external store and the application
// instances.

/**
 * `describe` when the global setup could make network namespaces, else `describe.skip` (the
 * global setup said why, loudly).
 */
export const describeWithNetns = process.env.PARTITIONS_NETNS === '1' ? describe : describe.skip;

/** A network with an external store and application instances; `close` removes everything. */
export class Lab {
  readonly apps: AppClient[] = [];

  private constructor(
    readonly net: Network,
    /** The external store (FencedStore's resource): never partitioned. */
    readonly store: RedisNode,
  ) {}

  static async create(): Promise<Lab> {
    const net = await Network.create();
    try {
      return new Lab(net, await startServer(await net.add('store')));
    } catch (err) {
      await net.close();
      throw err;
    }
  }

  /** Starts `count` instances (`app1`, `app2`, …), each in its own namespace, in parallel. */
  async startApps(count: number): Promise<AppClient[]> {
    const nets: NetNode[] = [];
    for (let i = 0; i < count; i++) nets.push(await this.net.add(`app${this.apps.length + i + 1}`));
    const started = await Promise.all(nets.map((n) => AppClient.start(n)));
    this.apps.push(...started);
    return started;
  }

  /** Opens the lock module with `options` in every instance of `apps`. */
  async open(apps: readonly AppClient[], options: Record<string, unknown>): Promise<void> {
    await Promise.all(
      apps.map((a) => a.request({ cmd: 'open', options, store: this.store.url }, 60_000)),
    );
  }

  async close(): Promise<void> {
    // What the instances logged (errors only): the first place to look when a scenario failed.
    for (const a of this.apps) {
      const text = a.errors.trim();
      if (text)
        process.stdout.write(
          `[partitions] stderr of ${a.name} (last 2 kB):\n${text.slice(-2_000)}\n`,
        );
    }
    await Promise.all(this.apps.map((a) => a.exit().catch(() => undefined)));
    await this.net.close();
    removeNodeDirs();
  }
}

/** Module options every instance uses besides its deployment's connection. */
export const COMMON_OPTIONS = { commandTimeoutMs: 1_000, keyPrefix: 'p:' };

/** One redis-server. */
export async function singleNode(
  lab: Lab,
): Promise<{ server: RedisNode; options: Record<string, unknown> }> {
  const server = await startServer(await lab.net.add('redis'));
  return { server, options: { ...COMMON_OPTIONS, redis: server.url } };
}

/** A master, one replica and three sentinels (quorum 2). */
export interface SentinelSetup {
  master: RedisNode;
  replica: RedisNode;
  sentinels: RedisNode[];
  options: Record<string, unknown>;
  /** The master's address as the first answering sentinel reports it. */
  reportedMaster(): Promise<string>;
  /** Waits until every sentinel reports `node` as the master and it says `role:master`. */
  waitPromoted(node: RedisNode, timeoutMs?: number): Promise<void>;
  /** Waits until `node` is a replica with its link up (e.g. the old master after a heal). */
  waitReplica(node: RedisNode, timeoutMs?: number): Promise<void>;
}

export const SENTINEL_NAME = 'partitions';

export async function sentinelSetup(lab: Lab, downAfterMs = 1_000): Promise<SentinelSetup> {
  const master = await startServer(await lab.net.add('m1'));
  const replica = await startServer(await lab.net.add('r1'), [
    '--replicaof',
    master.host,
    String(master.port),
  ]);
  const sentinels: RedisNode[] = [];
  for (let i = 1; i <= 3; i++) {
    sentinels.push(
      await startSentinel(await lab.net.add(`s${i}`), master, SENTINEL_NAME, downAfterMs),
    );
  }
  await waitFor(
    'the sentinels to know the replica and each other',
    async () => {
      if ((await replicationInfo(replica)).master_link_status !== 'up') return false;
      for (const s of sentinels) {
        const replicas = (await ask(s, 'SENTINEL', 'REPLICAS', SENTINEL_NAME).catch(
          () => [],
        )) as unknown[];
        const others = (await ask(s, 'SENTINEL', 'SENTINELS', SENTINEL_NAME).catch(
          () => [],
        )) as unknown[];
        if (replicas.length !== 1 || others.length !== 2) return false;
      }
      return true;
    },
    30_000,
    100,
  );
  const reported = async (s: RedisNode) =>
    ((await ask(s, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_NAME)) as string[])[0];
  return {
    master,
    replica,
    sentinels,
    options: {
      ...COMMON_OPTIONS,
      redis: {
        sentinels: sentinels.map((s) => ({ host: s.host, port: s.port })),
        name: SENTINEL_NAME,
      },
    },
    async reportedMaster() {
      for (const s of sentinels) {
        const host = await reported(s).catch(() => undefined);
        if (host) return host;
      }
      throw new Error('no sentinel answers');
    },
    waitPromoted: (node, timeoutMs = 30_000) =>
      waitFor(
        `the sentinels to promote ${node.net.name}`,
        async () => {
          for (const s of sentinels)
            if ((await reported(s).catch(() => '')) !== node.host) return false;
          return (await replicationInfo(node)).role === 'master';
        },
        timeoutMs,
        50,
      ),
    waitReplica: (node, timeoutMs = 60_000) =>
      waitFor(
        `${node.net.name} to be a replica again`,
        async () => {
          const info = await replicationInfo(node);
          return info.role === 'slave' && info.master_link_status === 'up';
        },
        timeoutMs,
        100,
      ),
  };
}

/** Three masters and one replica, which replicates the master serving `hotKey`'s slot. */
export interface ClusterSetup {
  masters: RedisNode[];
  replica: RedisNode;
  /** The master serving the hot key's slot at the start. */
  hotMaster: RedisNode;
  slot: number;
  options: Record<string, unknown>;
  /** Waits until every live node sees `node` as a master and the cluster is ok. */
  waitPromoted(node: RedisNode, live: readonly RedisNode[], timeoutMs?: number): Promise<void>;
}

const SLOT_RANGES: Array<[number, number]> = [
  [0, 5460],
  [5461, 10922],
  [10923, 16383],
];

async function clusterNodes(node: RedisNode): Promise<string[][]> {
  return String(await ask(node, 'CLUSTER', 'NODES'))
    .trim()
    .split('\n')
    .map((l) => l.trim().split(' '));
}

export async function clusterSetup(lab: Lab, hotRedisKey: string): Promise<ClusterSetup> {
  const args = [
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    'nodes.conf',
    '--cluster-node-timeout',
    '2000',
    // Any replica may take over, however long its link to the master has been down.
    '--cluster-replica-validity-factor',
    '0',
  ];
  const masters: RedisNode[] = [];
  for (let i = 1; i <= 3; i++) masters.push(await startServer(await lab.net.add(`c${i}`), args));
  const replica = await startServer(await lab.net.add('c4'), args);
  const slot = clusterKeySlot(hotRedisKey);
  const hotIndex = SLOT_RANGES.findIndex(([a, b]) => slot >= a && slot <= b);
  const hotMaster = masters[hotIndex];
  for (const [i, m] of masters.entries()) {
    await ask(m, 'CLUSTER', 'SET-CONFIG-EPOCH', i + 1);
    await ask(m, 'CLUSTER', 'ADDSLOTSRANGE', SLOT_RANGES[i][0], SLOT_RANGES[i][1]);
  }
  for (const n of [...masters.slice(1), replica])
    await ask(masters[0], 'CLUSTER', 'MEET', n.host, n.port);
  const all = [...masters, replica];
  await waitFor(
    'every cluster node to know every other',
    async () => {
      for (const n of all) {
        const nodes = await clusterNodes(n).catch(() => []);
        if (nodes.length !== 4 || nodes.some((f) => f[2].includes('handshake'))) return false;
      }
      return true;
    },
    30_000,
    100,
  );
  const hotId = String(await ask(hotMaster, 'CLUSTER', 'MYID'));
  await ask(replica, 'CLUSTER', 'REPLICATE', hotId);
  const healthy = async (live: readonly RedisNode[], master: RedisNode) => {
    for (const n of live) {
      if (!String(await ask(n, 'CLUSTER', 'INFO')).includes('cluster_state:ok')) return false;
      const me = (await clusterNodes(n)).find((f) => f[1].startsWith(`${master.host}:`));
      if (!me || !me[2].includes('master') || me[2].includes('fail')) return false;
    }
    return true;
  };
  await waitFor(
    'a healthy cluster with the replica in sync',
    async () =>
      (await healthy(all, hotMaster).catch(() => false)) &&
      (await replicationInfo(replica)).master_link_status === 'up',
    30_000,
    100,
  );
  return {
    masters,
    replica,
    hotMaster,
    slot,
    options: {
      ...COMMON_OPTIONS,
      redis: { cluster: all.map((n) => ({ host: n.host, port: n.port })) },
    },
    waitPromoted: (node, live, timeoutMs = 30_000) =>
      waitFor(
        `${node.net.name} promoted on every live cluster node`,
        () => healthy(live, node).catch(() => false),
        timeoutMs,
        100,
      ),
  };
}

/** Three independent masters for quorum (Redlock) locks. */
export async function quorumSetup(
  lab: Lab,
): Promise<{ nodes: RedisNode[]; options: Record<string, unknown> }> {
  const nodes: RedisNode[] = [];
  for (let i = 1; i <= 3; i++) nodes.push(await startServer(await lab.net.add(`q${i}`)));
  return {
    nodes,
    options: { ...COMMON_OPTIONS, redis: lab.store.url, nodes: nodes.map((n) => n.url) },
  };
}
