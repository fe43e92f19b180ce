// The queue under partitions and failover: a worker cut from Redis past its lease, and a
// Sentinel failover (SIGKILL of the master) mid-drain. No task may be lost (every id's handler
// ran to its end) or stuck (left ready, delayed, leased or dead); duplicates are at-least-once
// and only reported.
import { Test } from '@nestjs/testing';
import type { INestApplicationContext } from '@nestjs/common';
import { QueueService, RedisLockModule } from '../../lib';
import { waitFor } from '../support/helpers';
import type { AppClient } from './support/app-client';
import { checkQueue } from './support/checker';
import { Lab, sentinelSetup, singleNode, describeWithNetns } from './support/lab';
import { replicationInfo } from './support/nodes';
import { rounds } from './support/profile';
import { queueSummary, report } from './support/report';

const LEASE_MS = 1_000;
const TASKS_PER_ROUND = 200;
const WORK = { queue: 'orders', leaseMs: LEASE_MS, concurrency: 4, taskMs: 15 };

const mono = () => Number(process.hrtime.bigint()) / 1e6;

/** The test process's own module on the deployment (root namespace): enqueue and stats. */
async function queueApp(options: Record<string, unknown>): Promise<INestApplicationContext> {
  const ref = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot(options as never)],
  }).compile();
  return ref.init();
}

/**
 * Waits until nothing is ready, delayed or leased; resolves what is left (dead included), and
 * why `stats` failed when it never answered (then every id counts as stuck).
 */
async function drained(
  queues: QueueService,
  total: number,
  timeoutMs = 60_000,
): Promise<{ left: number; error?: string }> {
  let left = total;
  let error: string | undefined = 'stats never answered';
  await waitFor(
    'the queue to drain',
    async () => {
      const s = await queues.stats(WORK.queue).catch((err: Error) => {
        error = `stats failed: ${err.name}: ${err.message}`;
        return undefined;
      });
      if (!s) return false;
      error = undefined;
      left = s.ready + s.delayed + s.leased + s.dead;
      return s.ready + s.delayed + s.leased === 0;
    },
    timeoutMs,
    100,
  ).catch(() => undefined);
  return { left, error };
}

/** Tasks whose id starts with `prefix` that `app` ran to their end. */
function ranBy(app: AppClient, prefix: string): number {
  return app.events.filter((e) => e.ev === 'ran' && String(e.id).startsWith(prefix)).length;
}

/** Waits until one of `apps` ran `n` tasks whose id starts with `prefix`; resolves that one. */
async function busyWorker(apps: AppClient[], prefix: string, n: number): Promise<AppClient> {
  let busy: AppClient | undefined;
  await waitFor(
    `a worker to run ${n} tasks`,
    () => (busy = apps.find((a) => ranBy(a, prefix) >= n)) !== undefined,
    30_000,
    20,
  ).catch((err) => {
    throw new Error(
      `${(err as Error).message}; stderr: ${apps.map((a) => a.errors.slice(-1_000)).join('\n')}`,
    );
  });
  return busy!;
}

describeWithNetns('queue under partitions and failover', () => {
  let lab: Lab;

  beforeEach(async () => {
    lab = await Lab.create();
  });
  afterEach(async () => {
    await lab?.close();
  });

  it('a worker partitioned past its lease: no task lost or stuck', async () => {
    const { server, options } = await singleNode(lab);
    const [w1, w2] = await lab.startApps(2);
    await lab.open([w1, w2], options);
    const app = await queueApp(options);
    try {
      const queues = app.get(QueueService);
      await Promise.all([w1, w2].map((w) => w.request({ cmd: 'work', ...WORK })));
      const n = rounds(1);
      const ids: string[] = [];
      let left = 0;
      let error: string | undefined;
      for (let round = 0; round < n; round++) {
        const batch = Array.from({ length: TASKS_PER_ROUND }, (_, i) => `r${round}-${i}`);
        ids.push(...batch);
        await queues.enqueue(WORK.queue, batch);
        const victim = await busyWorker([w1, w2], `r${round}-`, 5);
        await lab.net.partition([victim.net], [server.net]);
        // Past the lease: the other worker must take over what w1 had leased.
        await new Promise((r) => setTimeout(r, 3 * LEASE_MS));
        await lab.net.heal();
        ({ left, error } = await drained(queues, ids.length));
        if (left > 0) break;
      }
      const found = checkQueue([...w1.events, ...w2.events], ids, left);
      const share = [w1, w2].map((w) => ranBy(w, 'r'));
      report(
        queueSummary('queue: worker partitioned past its lease', n, found, [
          `tasks run per worker ${share.join(' / ')}`,
          ...(error ? [error] : []),
        ]),
      );
      expect({ lost: found.lost, stuck: found.stuck }).toEqual({ lost: [], stuck: 0 });
    } finally {
      await app.close();
    }
  });

  it('Sentinel failover (master SIGKILL) mid-drain: no task lost or stuck', async () => {
    const setup = await sentinelSetup(lab);
    const [w1, w2] = await lab.startApps(2);
    await lab.open([w1, w2], setup.options);
    const app = await queueApp(setup.options);
    try {
      const queues = app.get(QueueService);
      await Promise.all([w1, w2].map((w) => w.request({ cmd: 'work', ...WORK })));
      const n = rounds(1);
      const ids: string[] = [];
      const servers = [setup.master, setup.replica];
      const start = mono();
      let left = 0;
      let error: string | undefined;
      for (let round = 0; round < n; round++) {
        const host = await setup.reportedMaster();
        const master = servers.find((s) => s.host === host)!;
        const replica = servers.find((s) => s !== master)!;
        const batch = Array.from({ length: TASKS_PER_ROUND }, (_, i) => `f${round}-${i}`);
        ids.push(...batch);
        await queues.enqueue(WORK.queue, batch);
        // The enqueue must be on the replica before the kill: an unreplicated write is lost by
        // any asynchronous failover (docs/scaling.md), which is not what this scenario checks.
        const offset = Number((await replicationInfo(master)).master_repl_offset);
        await waitFor(
          'the replica to have the enqueued tasks',
          async () => Number((await replicationInfo(replica)).slave_repl_offset) >= offset,
          10_000,
          20,
        );
        await busyWorker([w1, w2], `f${round}-`, 20);
        await master.kill();
        await setup.waitPromoted(replica);
        ({ left, error } = await drained(queues, ids.length));
        // The killed master returns as the new master's replica for the next round.
        await master.restart(['--replicaof', replica.host, String(replica.port)]);
        await setup.waitReplica(master);
        if (left > 0) break;
      }
      const found = checkQueue(
        [...w1.events, ...w2.events].filter((e) => e.t >= start),
        ids,
        left,
      );
      report(
        queueSummary('queue: Sentinel failover mid-drain', n, found, [
          'duplicates are at-least-once',
          ...(error ? [error] : []),
        ]),
      );
      expect({ lost: found.lost, stuck: found.stuck }).toEqual({ lost: [], stuck: 0 });
    } finally {
      await app.close();
    }
  });
});
