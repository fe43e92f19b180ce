import 'reflect-metadata';
import type { FlowNode } from '../../lib';
import { exited } from '../support/child';
import { queueAppAndClient, testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';
import { spawnQueueWorker, type QueueWorkerChild } from '../support/queue-crash';

describe('QueueService.enqueueFlow with workers in 3 processes, one SIGKILLed midway', () => {
  const prefix = uniquePrefix('queue-flows-proc');
  const [PARENTS, CHILDREN_A, CHILDREN_B] = ['fp', 'fc-a', 'fc-b'];
  const FLOWS = 500;
  const KIDS = 10;
  const TREES = 30;
  const ctx = queueAppAndClient(prefix);

  /** A worker process of the three queues (test/fixtures/queue-flow-child.ts). */
  const spawnWorker = (): Promise<QueueWorkerChild> =>
    spawnQueueWorker(
      {
        REDIS_URL: testRedisUrl(),
        PREFIX: prefix,
        QUEUES_JSON: JSON.stringify([PARENTS, CHILDREN_A, CHILDREN_B]),
        // Long enough that a live worker stalled by a loaded machine keeps its leases.
        LEASE_MS: '2000',
        CONCURRENCY: '50',
      },
      'test/fixtures/queue-flow-child.ts',
    );
  const hash = async (name: string) => ctx.redis.hgetall(`${prefix}obs:${name}`);
  /** The live worker processes a test leaves behind, for the next to use. */
  const running: QueueWorkerChild[] = [];

  it(`${FLOWS} flows of 1 parent x ${KIDS} children over 3 queues and ${TREES} trees 3 levels deep: every parent runs after all its children, with their results; none lost`, async () => {
    const { queues, redis: obs } = ctx;
    const flat: FlowNode[] = Array.from({ length: FLOWS }, (_, f) => {
      const children = Array.from({ length: KIDS }, (_, i) => ({
        queue: i % 2 === 0 ? CHILDREN_A : CHILDREN_B,
        id: `f${f}-k${i}`,
      }));
      return {
        queue: PARENTS,
        id: `f${f}`,
        payload: { kids: children.map((c) => `${c.queue}:${c.id}`) },
        children,
      };
    });
    // root (parents) -> 3 middles (children A) -> 3 leaves each (children B)
    const trees: FlowNode[] = Array.from({ length: TREES }, (_, t) => {
      const mids = [0, 1, 2].map((m) => {
        const leaves = [0, 1, 2].map((l) => ({ queue: CHILDREN_B, id: `t${t}-m${m}-l${l}` }));
        return {
          queue: CHILDREN_A,
          id: `t${t}-m${m}`,
          payload: { kids: leaves.map((c) => `${c.queue}:${c.id}`) },
          children: leaves,
        };
      });
      return {
        queue: PARENTS,
        id: `t${t}`,
        payload: { kids: mids.map((c) => `${c.queue}:${c.id}`) },
        children: mids,
      };
    });
    const parents = [
      ...flat.map((f) => `${f.queue}:${f.id}`),
      ...trees.flatMap((t) => [
        `${t.queue}:${t.id}`,
        ...t.children!.map((m) => `${m.queue}:${m.id}`),
      ]),
    ];
    const total = FLOWS * (KIDS + 1) + TREES * 13;

    const alive = await Promise.all([spawnWorker(), spawnWorker(), spawnWorker()]);
    // Enqueued while the workers run, 25 flows at a time.
    const all = [...flat, ...trees];
    for (let i = 0; i < all.length; i += 25) {
      await Promise.all(all.slice(i, i + 25).map((f) => queues.enqueueFlow(f)));
    }

    // Midway: SIGKILL a worker process that is running tasks.
    let victim: QueueWorkerChild | undefined;
    await waitFor(
      'half the tasks done, on a worker running tasks',
      async () => {
        if ((await obs.hlen(`${prefix}obs:done`)) < total / 2) return false;
        for (const w of alive) {
          if ((await obs.scard(`${prefix}obs:inflight:${w.pid}`)) > 0) victim = w;
        }
        return victim !== undefined;
      },
      30_000,
      10,
    );
    victim!.child.kill('SIGKILL');
    expect(await exited(victim!.child)).toBe('SIGKILL');
    const inFlightAtKill = new Set(await obs.smembers(`${prefix}obs:inflight:${victim!.pid}`));
    running.push(...alive.filter((w) => w !== victim), await spawnWorker());

    await waitFor(
      'every parent done',
      async () => (await obs.hlen(`${prefix}obs:done`)) >= total,
      45_000,
      50,
    );
    const runs = await hash('runs');
    const done = await hash('done');
    // None lost: every task ran to its end.
    expect(Object.keys(done)).toHaveLength(total);
    // Every parent saw each of its children's results (so ran after all of them).
    expect(await hash('bad')).toEqual({});
    // Once, but for a task the killed worker had in flight (at-least-once: it runs again).
    expect(parents.filter((p) => runs[p] !== '1' && !inFlightAtKill.has(p))).toEqual([]);
    expect(
      Object.entries(runs).filter(([name, n]) => n !== '1' && !inFlightAtKill.has(name)),
    ).toEqual([]);
    // The last acks follow the handlers' records.
    await waitFor('every task acked', async () => {
      for (const q of [PARENTS, CHILDREN_A, CHILDREN_B]) {
        const s = await queues.stats(q);
        if (s.ready + s.delayed + s.leased > 0) return false;
      }
      return true;
    });
    for (const q of [PARENTS, CHILDREN_A, CHILDREN_B]) {
      expect(await queues.list(q, 'waiting-children')).toEqual([]);
      expect((await queues.stats(q)).dead).toBe(0);
    }
  }, 120_000);

  it("a flow parent with a deadline on a paused queue, its children run by the worker processes: it expires once its children finished, the queue still paused; after resume one whose deadline is ahead runs with its children's results", async () => {
    const { queues } = ctx;
    // The processes the test above left running, else two of this test's own.
    if (running.length < 2) running.push(...(await Promise.all([spawnWorker(), spawnWorker()])));
    await queues.pause(PARENTS);
    try {
      const flow = (id: string, expiresInMs: number): FlowNode => {
        const children = Array.from({ length: 6 }, (_, i) => ({
          queue: i % 2 === 0 ? CHILDREN_A : CHILDREN_B,
          id: `${id}-k${i}`,
        }));
        return {
          queue: PARENTS,
          id,
          payload: { kids: children.map((c) => `${c.queue}:${c.id}`) },
          options: { expiresInMs },
          children,
        };
      };
      await queues.enqueueFlow(flow('dl-soon', 300));
      await queues.enqueueFlow(flow('dl-later', 60_000));
      await waitFor(
        'every child run',
        async () => (await queues.get(PARENTS, 'dl-later'))?.state === 'ready',
        10_000,
        20,
      );
      // Made ready, its deadline was indexed in the same script.
      const expiries = `${prefix}queue:{${PARENTS}}:expiries`;
      expect(await ctx.redis.zscore(expiries, 'dl-later')).not.toBeNull();
      // Within a round trip once its children finished (before, it stayed ready until resumed).
      await waitFor(
        'the parent whose deadline passed expired',
        async () => (await queues.get(PARENTS, 'dl-soon'))?.state === 'expired',
        5_000,
        20,
      );
      expect(await queues.stats(PARENTS)).toMatchObject({
        paused: true,
        ready: 1,
        waitingChildren: 0,
        expired: 1,
      });
      expect(await queues.get(PARENTS, 'dl-later')).toMatchObject({
        state: 'ready',
        children: { total: 6, completed: 6, failed: 0 },
      });
    } finally {
      await queues.resume(PARENTS);
    }
    await expect(queues.waitFor(PARENTS, 'dl-later', { timeoutMs: 10_000 })).resolves.toMatchObject(
      { state: 'completed' },
    );
    const runs = await hash('runs');
    expect([runs[`${PARENTS}:dl-soon`], runs[`${PARENTS}:dl-later`]]).toEqual([undefined, '1']);
    expect(Object.keys(await hash('bad'))).toEqual([]);
    expect(await ctx.redis.zcard(`${prefix}queue:{${PARENTS}}:expiries`)).toBe(0);
  }, 30_000);
});
