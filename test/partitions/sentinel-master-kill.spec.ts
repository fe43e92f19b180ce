// Sentinel, two instances selling one hot key with default options: SIGKILL of the master
// mid-sale. The lock must never have two holders across the promotion, the external FencedStore
// must never accept one fence from two tokens, and every instance must sell again after the
// promotion (the issue saw 0, 2 and 0 sales in three processes for 5 s after it).
import { waitFor } from '../support/helpers';
import { checkLocks } from './support/checker';
import { Lab, sentinelSetup, type SentinelSetup, describeWithNetns } from './support/lab';
import { rounds } from './support/profile';
import { lockSummary, report } from './support/report';
import { salesSince, sell, stopSelling, waitSales } from './support/sale';

const SALE = { key: 'stock', ttlMs: 1_000, waitMs: 2_000, workers: 2, holdMs: 3 };
/** How long every instance may take to sell again after the promotion. */
const RESUME_MS = 15_000;

const mono = () => Number(process.hrtime.bigint()) / 1e6;

describeWithNetns('Sentinel master kill mid-sale (default options)', () => {
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

  it('never two holders, no fence accepted twice, every instance sells again', async () => {
    const apps = lab.apps;
    const n = rounds(1);
    const start = mono();
    const notes: string[] = [];
    const stalled: string[] = [];
    const servers = [setup.master, setup.replica];
    await lab.open(apps, setup.options);
    await sell(apps, SALE);
    let failure: Error | undefined;
    try {
      for (let round = 0; round < n; round++) {
        const host = await setup.reportedMaster();
        const master = servers.find((s) => s.host === host)!;
        const replica = servers.find((s) => s !== master)!;
        await waitSales(apps, 20).catch((err: Error) => {
          stalled.push(`round ${round + 1}, before the kill`);
          throw err;
        });
        await master.kill();
        await setup.waitPromoted(replica);
        const promoted = mono();
        await waitFor(
          'every instance to sell after the promotion',
          () => apps.every((a) => salesSince(a, promoted) > 0),
          RESUME_MS,
          20,
        ).catch(() => stalled.push(`round ${round + 1}`));
        const resumed = (mono() - promoted) / 1000;
        notes.push(
          `round ${round + 1}: sales after the promotion ${apps.map((a) => salesSince(a, promoted)).join(' / ')} ` +
            `(${resumed.toFixed(1)} s)`,
        );
        // The killed master returns as the new master's replica for the next round.
        await master.restart(['--replicaof', replica.host, String(replica.port)]);
        await setup.waitReplica(master);
      }
    } catch (err) {
      // Reported with what was seen so far, then failed on.
      failure = err as Error;
      notes.push(`stopped early: ${failure.message}`);
    }
    const stopped = await stopSelling(apps);
    notes.push(`errors ${JSON.stringify(stopped.map((s) => s.errors))}`);
    const found = checkLocks(
      apps.flatMap((a) => a.events).filter((e) => e.t >= start),
      Infinity,
    );
    report(lockSummary('Sentinel master kill', n, found, notes));
    expect({
      overlaps: found.overlaps.length,
      fencesTwice: found.fencesTwice.length,
      stalled,
    }).toEqual({ overlaps: 0, fencesTwice: 0, stalled: [] });
    if (failure) throw failure;
  });
});
