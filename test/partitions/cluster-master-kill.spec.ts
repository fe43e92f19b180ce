// Redis Cluster, three instances selling one hot key: SIGKILL of the master serving the key's
// slot mid-sale. After the replica took over, every instance must be subscribed again to the
// lock's release channel on the promoted master (PUBSUB SHARDNUMSUB: one per instance; an
// instance that lost its subscription is woken only by its poll), and the external FencedStore
// must never accept one fence from two lock tokens.
import { checkLocks } from './support/checker';
import { clusterSetup, Lab, type ClusterSetup, describeWithNetns } from './support/lab';
import { ask, replicationInfo, type RedisNode } from './support/nodes';
import { rounds } from './support/profile';
import { lockSummary, report } from './support/report';
import { sell, salesIn, salesSince, stopSelling, waitSales } from './support/sale';
import { waitFor } from '../support/helpers';

const INSTANCES = 3;
const SALE = { key: 'stock', ttlMs: 1_000, waitMs: 3_000, workers: 2, holdMs: 3 };
const CHANNEL = `p:lock:{${SALE.key}}:released`;
/** How long the subscriptions may take to come back after the promotion. */
const RESUBSCRIBE_MS = 15_000;
/**
 * The sell rate after the kill is measured from this long after the promotion: in the first 2-3 s
 * the rate climbs back (measured in 500 ms steps: 0.3-0.8x of the rate before in the first
 * second; docs/guarantees.md), and the target is the rate it climbs back to.
 */
const RECOVERED_MS = 3_000;
const RATE_WINDOW_MS = 2_000;

const mono = () => Number(process.hrtime.bigint()) / 1e6;

async function subscribers(node: RedisNode): Promise<number> {
  const reply = (await ask(node, 'PUBSUB', 'SHARDNUMSUB', CHANNEL).catch(() => [])) as unknown[];
  return Number(reply[1] ?? 0);
}

describeWithNetns('Cluster master kill mid-sale', () => {
  let lab: Lab;
  let setup: ClusterSetup;

  beforeAll(async () => {
    lab = await Lab.create();
    setup = await clusterSetup(lab, `p:lock:{${SALE.key}}`);
    await lab.startApps(INSTANCES);
  });
  afterAll(async () => {
    await lab?.close();
  });

  it('every instance is subscribed on the promoted master; no fence accepted twice', async () => {
    const apps = lab.apps;
    const n = rounds(1);
    const start = mono();
    const notes: string[] = [];
    const counts: number[] = [];
    const ratios: number[] = [];
    let master = setup.hotMaster;
    let replica = setup.replica;
    const others = setup.masters.filter((m) => m !== master);
    await lab.open(apps, setup.options);
    await sell(apps, SALE);
    for (let round = 0; round < n; round++) {
      await waitSales(apps, 20);
      await waitFor(
        `${INSTANCES} subscribers of the lock channel on the hot master`,
        async () => (await subscribers(master)) === INSTANCES,
        RESUBSCRIBE_MS,
        50,
      );
      const before = mono();
      await new Promise((r) => setTimeout(r, 2_000));
      const rateBefore =
        apps.reduce((s, a) => s + salesSince(a, before), 0) / ((mono() - before) / 1000);

      await master.kill();
      await setup.waitPromoted(replica, [...others, replica]);
      const promoted = mono();
      let count = 0;
      await waitFor(
        `${INSTANCES} subscribers on the promoted master`,
        async () => (count = await subscribers(replica)) === INSTANCES,
        RESUBSCRIBE_MS,
        50,
      ).catch(() => undefined);
      counts.push(count);
      const resubscribedMs = mono() - promoted;
      // The rate once recovered (RECOVERED_MS after the promotion, over RATE_WINDOW_MS), and how
      // long the recovery took: the first half second after the promotion selling at 0.8x the
      // rate before or more. Reported, not asserted (rates on a shared machine).
      const settled = promoted + RECOVERED_MS;
      await new Promise((r) => setTimeout(r, settled + RATE_WINDOW_MS - mono()));
      const rateAfter = salesIn(apps, settled, settled + RATE_WINDOW_MS) / (RATE_WINDOW_MS / 1000);
      let recoveredMs = Infinity;
      for (let t = promoted; t + 500 <= settled + RATE_WINDOW_MS; t += 250) {
        if (salesIn(apps, t, t + 500) * 2 >= 0.8 * rateBefore) {
          recoveredMs = t + 500 - promoted;
          break;
        }
      }
      ratios.push(rateAfter / rateBefore);
      notes.push(
        `round ${round + 1}: ${count} subscribers ${Math.round(resubscribedMs)} ms after the ` +
          `promotion; ${Math.round(rateBefore)} sales/s before, ${Math.round(rateAfter)} ` +
          `${RECOVERED_MS / 1000}-${(RECOVERED_MS + RATE_WINDOW_MS) / 1000} s after ` +
          `(${(rateAfter / rateBefore).toFixed(2)}x); 0.8x reached ${recoveredMs} ms after ` +
          `(per instance since the promotion: ${apps.map((a) => salesSince(a, promoted)).join(' / ')})`,
      );

      // The killed master comes back (its nodes.conf kept) as the new master's replica.
      await master.restart();
      await waitFor(
        'the old master to replicate the promoted one',
        async () => (await replicationInfo(master)).master_link_status === 'up',
        30_000,
        100,
      );
      [master, replica] = [replica, master];
    }
    notes.push(
      `sell rate after / before: min ${Math.min(...ratios).toFixed(2)}x, ` +
        `median ${ratios.sort((x, y) => x - y)[Math.floor(ratios.length / 2)].toFixed(2)}x`,
    );
    const stopped = await stopSelling(apps);
    notes.push(`errors ${JSON.stringify(stopped.map((s) => s.errors))}`);
    const found = checkLocks(
      apps.flatMap((a) => a.events).filter((e) => e.t >= start),
      Infinity,
    );
    notes.push(
      `${found.overlaps.length} overlapping holders (no waitForReplicas: see docs/scaling.md)`,
    );
    report({
      ...lockSummary('Cluster master kill', n, found, notes),
      // Overlaps are possible here by design (asynchronous replication, no WAIT): reported only.
      overlaps: found.overlaps.length,
    });
    expect({ subscribers: counts, fencesTwice: found.fencesTwice.length }).toEqual({
      subscribers: counts.map(() => INSTANCES),
      fencesTwice: 0,
    });
  });
});
