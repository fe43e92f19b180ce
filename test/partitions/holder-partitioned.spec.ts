// A holder cut from Redis while inside withLock, on every deployment: its lock.signal must abort
// before anyone else can be granted the lock, and once the network heals, nothing delayed in it
// may bring the lost lock back (isHeld() and release() of the old holder answer false).
import type { AppClient } from './support/app-client';
import { checkLocks } from './support/checker';
import {
  clusterSetup,
  Lab,
  quorumSetup,
  sentinelSetup,
  singleNode,
  describeWithNetns,
} from './support/lab';
import type { NetNode } from './support/netns';
import type { RedisNode } from './support/nodes';
import { grantableAt, watchExpiry } from './support/expiry';
import { rounds } from './support/profile';
import { lockSummary, report } from './support/report';

const TTL_MS = 1_500;
/** The partition lasts at least this long (and until the contender released). */
const PARTITION_MS = 2.5 * TTL_MS;
const KEY = 'stock';
const REDIS_KEY = `p:lock:{${KEY}}`;

describeWithNetns('holder partitioned from Redis (withLock, TTL 1.5 s)', () => {
  let lab: Lab;
  let holder: AppClient;
  let contender: AppClient;
  let servers: RedisNode[] = [];

  beforeAll(async () => {
    lab = await Lab.create();
    [holder, contender] = await lab.startApps(2);
  });
  afterEach(async () => {
    await lab.net.heal();
    await Promise.all(
      [holder, contender].map((a) => a.request({ cmd: 'close' }).catch(() => undefined)),
    );
    await Promise.all(servers.map((s) => s.kill()));
    servers = [];
  });
  afterAll(async () => {
    await lab?.close();
  });

  /**
   * Rounds of: the holder takes the lock in withLock, is cut from `cutFrom` at a random moment
   * of its extension cycle, the contender polls tryAcquire (2 ms apart) until granted, holds
   * 100 ms and releases; once the partition has lasted PARTITION_MS it heals and the holder asks
   * isHeld() and release().
   */
  async function holderRounds(
    scenario: string,
    n: number,
    cutFrom: NetNode[],
    lockNodes: RedisNode[],
  ): Promise<void> {
    const start = Number(process.hrtime.bigint()) / 1e6;
    const notes: string[] = [];
    const expiries = new Map<string, number>();
    let notGranted = 0;
    for (let round = 0; round < n; round++) {
      const from = holder.events.length;
      holder.send({ cmd: 'hold', key: KEY, ttlMs: TTL_MS, waitMs: 10_000 });
      const entered = await holder.next((e) => e.ev === 'enter' || e.ev === 'error', from, 30_000);
      if (entered.ev === 'error') throw new Error(`holder: ${entered.name}: ${entered.message}`);
      const expiry = watchExpiry(lockNodes, REDIS_KEY, entered.token);
      // A random moment of the extension cycle (fault injection, not settling).
      await new Promise((r) => setTimeout(r, Math.random() * TTL_MS));
      await lab.net.partition([holder.net], cutFrom);
      const cutAt = Date.now();
      const contended = await contender.request(
        { cmd: 'contend', key: KEY, ttlMs: TTL_MS, pollMs: 2, holdMs: 100, timeoutMs: 20_000 },
        30_000,
      );
      if (!contended.granted) notGranted++;
      expiries.set(
        entered.token,
        grantableAt(await expiry.stop(), Math.floor(lockNodes.length / 2) + 1),
      );
      const left = PARTITION_MS - (Date.now() - cutAt);
      if (left > 0) await new Promise((r) => setTimeout(r, left));
      await lab.net.heal();
      holder.send({ cmd: 'check' });
      await holder.next((e) => e.ev === 'done' && e.cmd === 'hold', from, 60_000);
    }
    if (notGranted) notes.push(`contender not granted in ${notGranted} rounds`);
    const events = [...holder.events, ...contender.events].filter((e) => e.t >= start);
    const found = checkLocks(events, Number(process.hrtime.bigint()) / 1e6, expiries);
    const lost = holder.events.filter((e) => e.ev === 'abort' && e.t >= start).length;
    notes.push(`holder's signal aborted in ${lost} of ${n} rounds`);
    // The abort timer is armed before `expiresAt`; past it means the event loop was held up.
    const late = holder.events
      .filter((e) => e.ev === 'abort' && e.t >= start && e.expiresAt !== undefined)
      .map((e) => e.wall - e.expiresAt);
    if (late.length)
      notes.push(`abort vs the holder's expiresAt: max ${Math.max(...late).toFixed(1)} ms`);
    report(lockSummary(scenario, n, found, notes));
    expect({
      overlaps: found.overlaps.length,
      negativeMargins: found.margins.filter((m) => m <= 0),
      revived: found.revived.map((e) => ({ held: e.held, released: e.released })),
      fencesTwice: found.fencesTwice,
      unfenced: found.unfenced.map((h) => ({ fence: h.fence, write: h.fenceOk })),
      notGranted,
    }).toEqual({
      overlaps: 0,
      negativeMargins: [],
      revived: [],
      fencesTwice: [],
      unfenced: [],
      notGranted: 0,
    });
    // Every round measured a margin: the holder lost the lock and the contender got it.
    expect(found.margins).toHaveLength(n);
  }

  it('single node: the signal aborts before the next grant, nothing revives', async () => {
    const { server, options } = await singleNode(lab);
    servers = [server];
    await Promise.all(
      [holder, contender].map((a) => a.request({ cmd: 'open', options, store: lab.store.url })),
    );
    await holderRounds('holder partitioned: single node', rounds(2), [server.net], [server]);
  });

  it('Sentinel: the holder cut from the master', async () => {
    const setup = await sentinelSetup(lab);
    servers = [setup.master, setup.replica, ...setup.sentinels];
    await lab.open([holder, contender], setup.options);
    await holderRounds(
      'holder partitioned: Sentinel',
      rounds(1),
      [setup.master.net],
      [setup.master],
    );
  });

  it('Cluster: the holder cut from the master of the lock slot', async () => {
    const setup = await clusterSetup(lab, REDIS_KEY);
    servers = [...setup.masters, setup.replica];
    await lab.open([holder, contender], setup.options);
    await holderRounds(
      'holder partitioned: Cluster',
      rounds(1),
      [setup.hotMaster.net],
      [setup.hotMaster],
    );
  });

  it('quorum (3 masters): the holder cut from 2 of them', async () => {
    const setup = await quorumSetup(lab);
    servers = setup.nodes;
    await lab.open([holder, contender], setup.options);
    await holderRounds(
      'holder partitioned: quorum',
      rounds(2),
      [setup.nodes[0].net, setup.nodes[1].net],
      setup.nodes,
    );
  });
});
