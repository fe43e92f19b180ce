// Sentinel split-brain: the master is cut from its replica and the sentinels while the
// application instances still reach it. The sentinels promote the replica; an instance that
// connects now (asking the sentinels) sells on the promoted master while the other keeps selling
// on the old one, until the heal and the old master's demotion. With default options the lock
// must never have two holders, and the external FencedStore must never accept one fence from
// two lock tokens.
import { checkLocks } from './support/checker';
import { Lab, sentinelSetup, type SentinelSetup, describeWithNetns } from './support/lab';
import { rounds } from './support/profile';
import { lockSummary, report } from './support/report';
import { sell, stopSelling, waitSales } from './support/sale';

/** How long both sides sell after the second instance reached the promoted master. */
const SPLIT_MS = 5_000;
const SALE = { key: 'stock', ttlMs: 1_000, waitMs: 2_000, workers: 2, holdMs: 3 };

describeWithNetns('Sentinel split-brain (default options)', () => {
  let lab: Lab;
  let setup: SentinelSetup;

  beforeAll(async () => {
    lab = await Lab.create();
    setup = await sentinelSetup(lab);
    await lab.startApps(2);
  });
  afterAll(async () => {
    await lab?.close();
  });

  it('never grants the lock to two holders, never accepts a fence twice', async () => {
    const [a, b] = lab.apps;
    const n = rounds(1);
    const start = Number(process.hrtime.bigint()) / 1e6;
    const notes: string[] = [];
    const servers = [setup.master, setup.replica];
    for (let round = 0; round < n; round++) {
      const host = await setup.reportedMaster();
      const master = servers.find((s) => s.host === host)!;
      const replica = servers.find((s) => s !== master)!;
      await lab.open([a, b], setup.options);
      await sell([a, b], SALE);
      await waitSales([a, b], 5);

      const phases: string[] = [];
      const t0 = Date.now();
      const phase = (what: string) =>
        phases.push(`${what} +${((Date.now() - t0) / 1000).toFixed(1)}s`);
      await lab.net.partition([master.net], [replica.net, ...setup.sentinels.map((s) => s.net)]);
      await setup.waitPromoted(replica);
      phase('promoted');
      // b reconnects now: the sentinels send it to the promoted master; a stays on the old one.
      await stopSelling([b]);
      await b.request({ cmd: 'close' });
      await lab.open([b], setup.options);
      await sell([b], SALE);
      phase('b reopened');
      await new Promise((r) => setTimeout(r, SPLIT_MS));

      await lab.net.heal();
      await setup.waitReplica(master);
      phase('old master demoted');
      const stopped = await stopSelling([a, b]);
      phase('stopped');
      notes.push(
        `round ${round + 1}: ${phases.join(', ')}; errors ${JSON.stringify(stopped.map((s) => s.errors))}`,
      );
      await Promise.all([a, b].map((x) => x.request({ cmd: 'close' })));
    }
    const found = checkLocks(
      [...a.events, ...b.events].filter((e) => e.t >= start),
      Infinity,
    );
    report(lockSummary('Sentinel split-brain', n, found, notes));
    expect({
      overlaps: found.overlaps.length,
      fencesTwice: found.fencesTwice.length,
      unfenced: found.unfenced.length,
    }).toEqual({ overlaps: 0, fencesTwice: 0, unfenced: 0 });
  });
});
