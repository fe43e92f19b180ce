import { spawn } from 'node:child_process';
import { waitFor } from './helpers';
import { askNode, NODE_HOST } from './redis-node';
import { redisServerBinary, startRedisServer, type RedisServer } from './redis-server';

/** One node as the cluster sees it (a line of `CLUSTER NODES`). */
export interface ClusterNodeView {
  id: string;
  port: number;
  role: 'master' | 'replica';
  /** Marked as failing (`fail` or `fail?`) by the node that was asked. */
  failing: boolean;
  /** The master's id, for a replica. */
  masterId?: string;
  /** Slot ranges served, for a master: `[first, last]`. */
  slots: Array<[number, number]>;
}

/** A Redis Cluster of real `redis-server --cluster-enabled yes` processes on free ports. */
export interface RedisClusterProcesses {
  /** Every node process, masters and replicas (in creation order). */
  readonly servers: readonly RedisServer[];
  /** `{ host, port }` of every node: startup nodes for an ioredis `Cluster`. */
  readonly startupNodes: Array<{ host: string; port: number }>;
  /** The cluster as a live node sees it. */
  view(): Promise<ClusterNodeView[]>;
  /** The port of the master serving `slot` now. */
  masterOfSlot(slot: number): Promise<number>;
  /**
   * Coordinated failover: `CLUSTER FAILOVER` on a replica of the master on `masterPort`; resolves
   * with the replica's port once every live node agrees it is the master and the cluster is ok.
   */
  failover(masterPort: number): Promise<number>;
  /**
   * Crash: SIGKILL the master on `masterPort`; resolves with the port of the replica that took
   * over once every live node agrees and the cluster is ok again.
   */
  killMaster(masterPort: number): Promise<number>;
  /** Starts a stopped/killed node again (it rejoins, as a replica when its slots moved). */
  restart(port: number): Promise<void>;
  /** Resolves when every live node says `cluster_state:ok` and all agree on the slot owners. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** Stops every node. */
  stop(): Promise<void>;
}

/** Options of `startRedisCluster`. */
export interface RedisClusterSetup {
  /** @default 3 */
  masters?: number;
  /** Replicas per master. @default 1 */
  replicas?: number;
  /**
   * `cluster-node-timeout`: how long a node may be unreachable before it counts as failing.
   * @default 2000
   */
  nodeTimeoutMs?: number;
}

/** One command to one node (never retried: the node may be dead), its reply as text. */
async function ask(port: number, ...args: Array<string | number>): Promise<string> {
  return String(await askNode(port, ...args));
}

function parseNodes(text: string): ClusterNodeView[] {
  return text
    .trim()
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => {
      const [id, address, flags, master, , , , , ...slotFields] = line.trim().split(' ');
      const port = Number(address.split('@')[0].split(':').pop());
      const flagList = flags.split(',');
      const slots: Array<[number, number]> = [];
      for (const field of slotFields) {
        if (field.startsWith('[')) continue; // importing / migrating
        const [first, last = first] = field.split('-').map(Number);
        slots.push([first, last]);
      }
      return {
        id,
        port,
        role: flagList.includes('master') ? ('master' as const) : ('replica' as const),
        failing: flagList.includes('fail') || flagList.includes('fail?'),
        masterId: master === '-' ? undefined : master,
        slots,
      };
    });
}

function runRedisCli(args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(redisServerBinary('redis-cli'), args, {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else reject(new Error(`redis-cli ${args.join(' ')} exited with ${code}:\n${output}`));
    });
  });
}

/**
 * Starts `masters × (1 + replicas)` redis-server processes in cluster mode (each with its own
 * `nodes.conf` in its own temp dir), creates the cluster with `redis-cli --cluster create`, and
 * resolves once every node reports `cluster_state:ok` and every replica is in sync.
 */
export async function startRedisCluster(
  setup: RedisClusterSetup = {},
): Promise<RedisClusterProcesses> {
  const masters = setup.masters ?? 3;
  const replicas = setup.replicas ?? 1;
  const nodeTimeout = setup.nodeTimeoutMs ?? 2_000;
  const args = [
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    'nodes.conf',
    '--cluster-node-timeout',
    String(nodeTimeout),
    // Any replica may take over, however long its link to the master has been down.
    '--cluster-replica-validity-factor',
    '0',
  ];
  const started = await Promise.allSettled(
    Array.from({ length: masters * (1 + replicas) }, () => startRedisServer(args)),
  );
  const servers = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    // Do not leave the nodes that did start running.
    await Promise.all(servers.map((s) => s.stop()));
    throw failed.reason;
  }
  const down = new Set<number>();
  const live = () => servers.filter((s) => !down.has(s.port));

  const view = async (): Promise<ClusterNodeView[]> => {
    let lastError: unknown;
    for (const server of live()) {
      try {
        return parseNodes(await ask(server.port, 'CLUSTER', 'NODES'));
      } catch (err) {
        lastError = err;
      }
    }
    throw lastError;
  };

  /** True when every live node says ok and sees the same live masters covering all slots. */
  const healthy = async (): Promise<boolean> => {
    const owners: string[] = [];
    for (const server of live()) {
      const info = await ask(server.port, 'CLUSTER', 'INFO');
      if (!info.includes('cluster_state:ok')) return false;
      const nodes = parseNodes(await ask(server.port, 'CLUSTER', 'NODES'));
      const serving = nodes.filter((n) => n.role === 'master' && n.slots.length > 0);
      if (serving.some((n) => n.failing || down.has(n.port))) return false;
      const covered = serving.reduce(
        (sum, n) => sum + n.slots.reduce((s, [a, b]) => s + b - a + 1, 0),
        0,
      );
      if (covered !== 16_384) return false;
      owners.push(
        serving
          .map((n) => `${n.port}:${n.slots.map((r) => r.join('-')).join(',')}`)
          .sort()
          .join(' '),
      );
      const me = nodes.find((n) => n.port === server.port);
      if (me?.role === 'replica') {
        const replication = await ask(server.port, 'INFO', 'replication');
        if (!replication.includes('master_link_status:up')) return false;
      }
    }
    return owners.every((o) => o === owners[0]);
  };
  const waitHealthy = (timeoutMs = 30_000) =>
    waitFor('a healthy cluster', () => healthy().catch(() => false), timeoutMs, 100);

  /**
   * The live replica of the master on `masterPort`. Right after a failover the node asked may not
   * show the old master as the new one's replica yet: it looks again for up to 10 s.
   */
  const replicaOf = async (masterPort: number): Promise<number> => {
    let found: number | undefined;
    await waitFor(
      `a live replica of the master on port ${masterPort}`,
      async () => {
        const nodes = await view().catch(() => []);
        const master = nodes.find((n) => n.port === masterPort && n.role === 'master');
        const replica = nodes.find(
          (n) =>
            n.role === 'replica' && n.masterId === master?.id && !down.has(n.port) && !n.failing,
        );
        found = master && replica ? replica.port : undefined;
        return found !== undefined;
      },
      10_000,
      100,
    ).catch(() => undefined);
    if (found === undefined) throw new Error(`no live replica of a master on port ${masterPort}`);
    return found;
  };
  /** Waits until every live node sees the node on `port` as a master serving slots. */
  const promoted = async (port: number): Promise<void> => {
    await waitFor(
      `node ${port} promoted on every live node`,
      async () => {
        for (const server of live()) {
          const nodes = parseNodes(await ask(server.port, 'CLUSTER', 'NODES').catch(() => ''));
          const node = nodes.find((n) => n.port === port);
          if (!node || node.role !== 'master' || node.slots.length === 0) return false;
        }
        return true;
      },
      30_000,
      50,
    );
    await waitHealthy();
  };

  const cluster: RedisClusterProcesses = {
    servers,
    startupNodes: servers.map((s) => ({ host: NODE_HOST, port: s.port })),
    view,
    async masterOfSlot(slot) {
      const owner = (await view()).find(
        (n) =>
          n.role === 'master' && !n.failing && n.slots.some(([a, b]) => slot >= a && slot <= b),
      );
      if (!owner) throw new Error(`no master serves slot ${slot}`);
      return owner.port;
    },
    async failover(masterPort) {
      const replica = await replicaOf(masterPort);
      await ask(replica, 'CLUSTER', 'FAILOVER');
      await promoted(replica);
      return replica;
    },
    async killMaster(masterPort) {
      const replica = await replicaOf(masterPort);
      const server = servers.find((s) => s.port === masterPort)!;
      down.add(masterPort);
      server.process.kill('SIGKILL');
      await server.stop();
      await promoted(replica);
      return replica;
    },
    async restart(port) {
      await servers.find((s) => s.port === port)!.restart();
      down.delete(port);
    },
    waitHealthy,
    async stop() {
      await Promise.all(servers.map((s) => s.stop()));
    },
  };

  try {
    await runRedisCli(
      [
        '--cluster',
        'create',
        ...servers.map((s) => `${NODE_HOST}:${s.port}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      60_000,
    );
    await waitFor(
      'every node to know every other',
      async () => {
        for (const s of servers) {
          const info = await ask(s.port, 'CLUSTER', 'INFO').catch(() => '');
          if (!info.includes(`cluster_known_nodes:${servers.length}`)) return false;
        }
        return true;
      },
      30_000,
      100,
    );
    await waitHealthy();
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}
