import { execFile, execFileSync } from 'node:child_process';

// The partition suite's network: every Redis node, sentinel and application instance runs in a
// network namespace of its own (`rlp-<name>`), joined by a veth pair to one bridge in a hub
// namespace (`rlp-hub`), on the private subnet 10.213.47.0/24. The root namespace reaches the
// bridge through one more veth (`rlp-root`, 10.213.47.1), so the test process can talk to every
// node; no partition ever involves that address. Partitions are iptables DROP rules inside the
// namespaces, healed by flushing them. Nothing outside these interfaces is touched.

/** Prefix of every namespace and root-side interface the suite makes (the sweep removes them). */
export const NETNS_PREFIX = 'rlp-';
/** The suite's subnet: only addresses on its own veths. */
export const SUBNET = '10.213.47';
/** The root namespace's address on the bridge (the test process). */
export const ROOT_IP = `${SUBNET}.1`;
const HUB = `${NETNS_PREFIX}hub`;
const ROOT_LINK = `${NETNS_PREFIX}root`;

/** One network namespace with its address on the bridge. */
export interface NetNode {
  /** Short name (`m1`, `s2`, `app1`): the namespace is `rlp-<name>`. */
  readonly name: string;
  readonly ns: string;
  readonly ip: string;
}

/** Runs `sh -c script`; rejects with its output when it fails. */
export function sh(script: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('sh', ['-c', script], { timeout: 30_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${script}\n${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

/**
 * Whether this machine can make the suite's network: root, `ip netns`, and iptables inside a
 * namespace. `reason` says what is missing.
 */
export function netnsSupport(): { ok: boolean; reason: string } {
  if (process.getuid?.() !== 0) return { ok: false, reason: 'not running as root' };
  const probe = `${NETNS_PREFIX}probe${process.pid}`;
  try {
    execFileSync(
      'sh',
      [
        '-c',
        `ip netns add ${probe} && ip netns exec ${probe} iptables -S >/dev/null; s=$?; ` +
          `ip netns del ${probe}; exit $s`,
      ],
      { stdio: 'pipe', timeout: 10_000 },
    );
    return { ok: true, reason: '' };
  } catch (err) {
    const e = err as { stderr?: Buffer; message: string };
    return {
      ok: false,
      reason: `cannot make a network namespace with iptables: ${e.stderr?.toString().trim() || e.message}`,
    };
  }
}

/**
 * Removes everything a run may have left: kills the processes still inside `rlp-*` namespaces
 * (only this suite's own), deletes those namespaces and the root-side veth.
 */
export async function sweepNetwork(): Promise<string[]> {
  const names = (await sh('ip netns list').catch(() => ''))
    .split('\n')
    .map((l) => l.trim().split(' ')[0])
    .filter((n) => n.startsWith(NETNS_PREFIX));
  for (const ns of names) {
    await sh(`ip netns pids ${ns} | xargs -r kill -9; ip netns del ${ns}`).catch(() => undefined);
  }
  await sh(`ip link del ${ROOT_LINK} 2>/dev/null || true`);
  return names;
}

/** The suite's bridge and the namespaces on it; `close` removes them all. */
export class Network {
  private readonly nodes = new Map<string, NetNode>();
  private readonly cut = new Set<string>();
  private nextHost = 2;

  private constructor() {}

  /** Makes the hub namespace, its bridge and the root namespace's veth onto it. */
  static async create(): Promise<Network> {
    await sweepNetwork();
    await sh(
      [
        `ip netns add ${HUB}`,
        `ip -n ${HUB} link set lo up`,
        `ip -n ${HUB} link add br0 type bridge`,
        `ip -n ${HUB} link set br0 up`,
        `ip link add ${ROOT_LINK} type veth peer name root netns ${HUB}`,
        `ip -n ${HUB} link set root master br0 up`,
        `ip addr add ${ROOT_IP}/24 dev ${ROOT_LINK}`,
        `ip link set ${ROOT_LINK} up`,
      ].join(' && '),
    );
    return new Network();
  }

  /** Adds namespace `rlp-<name>` with the next address of the subnet, on the bridge. */
  async add(name: string): Promise<NetNode> {
    if (this.nodes.has(name)) throw new Error(`namespace ${name} exists`);
    if (this.nextHost > 254) throw new Error('subnet full');
    const node = { name, ns: `${NETNS_PREFIX}${name}`, ip: `${SUBNET}.${this.nextHost++}` };
    await sh(
      [
        `ip netns add ${node.ns}`,
        `ip -n ${node.ns} link set lo up`,
        `ip -n ${HUB} link add v-${name} type veth peer name eth0 netns ${node.ns}`,
        `ip -n ${HUB} link set v-${name} master br0 up`,
        `ip -n ${node.ns} addr add ${node.ip}/24 dev eth0`,
        `ip -n ${node.ns} link set eth0 up`,
      ].join(' && '),
    );
    this.nodes.set(name, node);
    return node;
  }

  /**
   * Cuts every node of `a` from every node of `b`, both ways: DROP rules on INPUT and OUTPUT in
   * each namespace for the other side's addresses (established connections included: their
   * packets are dropped and retransmitted after the heal, like on a real network).
   */
  async partition(a: readonly NetNode[], b: readonly NetNode[]): Promise<void> {
    const rules = new Map<string, string[]>();
    const drop = (from: NetNode, peers: readonly NetNode[]) => {
      const list = rules.get(from.ns) ?? [];
      for (const p of peers) {
        if (p.ip === ROOT_IP) throw new Error('the root address is never partitioned');
        list.push(`-A INPUT -s ${p.ip} -j DROP`, `-A OUTPUT -d ${p.ip} -j DROP`);
      }
      rules.set(from.ns, list);
    };
    for (const n of a) drop(n, b);
    for (const n of b) drop(n, a);
    // One iptables-restore per namespace: its rules apply at once.
    await Promise.all(
      [...rules].map(([ns, list]) => {
        this.cut.add(ns);
        return sh(
          `printf '%s\\n' '*filter' ${list.map((r) => `'${r}'`).join(' ')} 'COMMIT' | ` +
            `ip netns exec ${ns} iptables-restore --noflush`,
        );
      }),
    );
  }

  /** Removes every partition rule (flushes INPUT and OUTPUT where rules were added). */
  async heal(): Promise<void> {
    const namespaces = [...this.cut];
    this.cut.clear();
    await Promise.all(
      namespaces.map((ns) =>
        sh(`ip netns exec ${ns} iptables -F INPUT && ip netns exec ${ns} iptables -F OUTPUT`),
      ),
    );
  }

  /** Kills what still runs in the namespaces, deletes them, the hub and the root veth. */
  async close(): Promise<void> {
    this.nodes.clear();
    this.cut.clear();
    await sweepNetwork();
  }
}
