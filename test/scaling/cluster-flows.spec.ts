import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Cluster } from 'ioredis';
import {
  FlowError,
  QueueFullError,
  QueueService,
  type FlowNode,
  type QueueWorkerHandle,
  type RunningTask,
} from '../../lib';
import { keyBase } from '../../lib/queue/flows/flow-keys';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { clusterKeySlot } from '../../lib/redis/cluster-slot';
import { killSpawnedChildren } from '../support/child';
import { createLockApp, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisCluster, type RedisClusterProcesses } from '../support/redis-cluster';
import { NODE_HOST } from '../support/redis-node';
import { startReplyCuttingProxy } from '../support/reply-cutting-proxy';

describe('QueueService.enqueueFlow on a Redis Cluster (3 masters + 3 replicas)', () => {
  const prefix = uniquePrefix('cluster-flows');
  let cluster: RedisClusterProcesses;
  let app: INestApplicationContext;
  let queues: QueueService;
  let direct: Cluster;
  const workers: QueueWorkerHandle[] = [];
  /** Three queue names whose slots are served by three different masters. */
  let apart: string[];

  const state = async (queue: string, id: string) => (await queues.get(queue, id))?.state;
  /** Each task returns its 'queue:id'; a parent returns its children's results. */
  const work = (queue: string) =>
    workers.push(
      queues.process(
        queue,
        async (t: RunningTask) => {
          const results = await t.childResults();
          return Object.keys(results).length > 0 ? results : `${t.queue}:${t.id}`;
        },
        { concurrency: 20 },
      ),
    );

  beforeAll(async () => {
    cluster = await startRedisCluster();
    app = await createLockApp({
      redis: { cluster: cluster.startupNodes },
      keyPrefix: prefix,
      commandTimeoutMs: 2_000,
      queue: { keepCompleted: { count: 1_000, ageMs: 600_000 } },
    });
    queues = app.get(QueueService);
    direct = new Cluster(cluster.startupNodes, { redisOptions: { commandTimeout: 2_000 } });
    await new Promise((resolve) => direct.once('ready', resolve));
    const byMaster = new Map<number, string>();
    for (let i = 0; byMaster.size < 3; i++) {
      const name = `flow-q${i}`;
      const master = await cluster.masterOfSlot(clusterKeySlot(`{${name}}`));
      if (!byMaster.has(master)) byMaster.set(master, name);
    }
    apart = [...byMaster.values()];
  }, 90_000);

  /** Two queue names of `stem`, used by no other test, whose slots two different masters serve. */
  const onTwoMasters = async (stem: string): Promise<[string, string]> => {
    const names: string[] = [];
    const masters = new Set<number>();
    for (let i = 0; names.length < 2; i++) {
      const name = `${stem}-q${i}`;
      const master = await cluster.masterOfSlot(clusterKeySlot(`{${name}}`));
      if (!masters.has(master)) {
        masters.add(master);
        names.push(name);
      }
    }
    return [names[0], names[1]];
  };
  /** Undoes what a test changed, after it (passed or not). */
  let afterThis: (() => Promise<unknown>) | undefined;
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close()));
    await afterThis?.();
    afterThis = undefined;
  });
  afterAll(async () => {
    await killSpawnedChildren();
    await app?.close();
    direct?.disconnect();
    await cluster?.stop();
  });

  it('a tree whose queues share a hash tag: one script, all or nothing, advanced in the ack', async () => {
    const [orders, payments, stock] = ['{shop}orders', '{shop}payments', '{shop}stock'];
    await queues.setMaxSize(stock, 3);
    const flow = (id: string, kids: number): FlowNode => ({
      queue: orders,
      id,
      children: [
        { queue: payments, id: `${id}-pay` },
        ...Array.from({ length: kids }, (_, i) => ({ queue: stock, id: `${id}-s${i}` })),
      ],
    });
    await expect(queues.enqueueFlow(flow('too-big', 4))).rejects.toBeInstanceOf(QueueFullError);
    expect(await queues.get(orders, 'too-big')).toBeUndefined();
    expect(await queues.get(payments, 'too-big-pay')).toBeUndefined();
    await queues.enqueueFlow(flow('o1', 2));
    // The children complete by hand: the last ack makes the parent ready in the same script.
    const leased = [...(await queues.claim(payments, 10)), ...(await queues.claim(stock, 10))];
    expect(leased.map((t) => t.parent)).toEqual(leased.map(() => ({ queue: orders, id: 'o1' })));
    // No outcome goes through an outbox: each ack advances the parent itself.
    const outboxes = jest.spyOn(queues.store.flows, 'applyOutboxes');
    for (const t of leased.slice(1)) await queues.ack(t, `${t.queue}:${t.id}`);
    expect(await state(orders, 'o1')).toBe('waiting-children');
    await queues.ack(leased[0], `${leased[0].queue}:${leased[0].id}`);
    expect(await state(orders, 'o1')).toBe('ready');
    expect(outboxes).not.toHaveBeenCalled();
    outboxes.mockRestore();
    work(orders);
    await waitFor('the parent', async () => (await state(orders, 'o1')) === 'completed', 15_000);
    expect((await queues.get(orders, 'o1'))?.result).toEqual({
      [`${payments}:o1-pay`]: `${payments}:o1-pay`,
      [`${stock}:o1-s0`]: `${stock}:o1-s0`,
      [`${stock}:o1-s1`]: `${stock}:o1-s1`,
    });
  }, 60_000);

  it('a tree over three slots (A -> B, C -> A): parents first, outcomes through the outbox', async () => {
    const [a, b, c] = apart;
    const flows = Array.from({ length: 20 }, (_, f) => ({
      queue: a,
      id: `r${f}`,
      children: [
        { queue: b, id: `r${f}-b` },
        { queue: c, id: `r${f}-c`, children: [{ queue: a, id: `r${f}-leaf` }] },
      ],
    }));
    await Promise.all(flows.map((f) => queues.enqueueFlow(f)));
    expect(await queues.get(a, 'r0')).toMatchObject({
      state: 'waiting-children',
      children: { total: 2, completed: 0, failed: 0 },
    });
    for (const q of apart) work(q);
    await waitFor(
      'every root',
      async () => {
        for (const f of flows) if ((await state(a, f.id)) !== 'completed') return false;
        return true;
      },
      20_000,
      20,
    );
    expect((await queues.get(a, 'r7'))?.result).toEqual({
      [`${b}:r7-b`]: `${b}:r7-b`,
      [`${c}:r7-c`]: { [`${a}:r7-leaf`]: `${a}:r7-leaf` },
    });
    for (const q of apart) expect(await direct.exists(queueRedisKeys(prefix, q).outbox)).toBe(0);
  }, 60_000);

  it('across slots, a drained child fails its parent, popped and dequeued ones complete theirs, and no link is left', async () => {
    const [a, b, c] = apart;
    await queues.enqueueFlow({ queue: a, id: 'drained', children: [{ queue: b, id: 'd-1' }] });
    await queues.enqueueFlow({
      queue: a,
      id: 'popped',
      children: [
        { queue: c, id: 'p-1' },
        { queue: c, id: 'p-2' },
      ],
    });
    const waiting = queues.waitFor(a, 'drained', { timeoutMs: 20_000 });
    expect(await queues.drain(b)).toBe(1);
    expect(await waiting).toMatchObject({ state: 'dead' });
    expect((await queues.get(a, 'drained'))?.error?.name).toBe('FlowChildFailedError');

    expect((await queues.pop(c, 1)).map((t) => t.id)).toEqual(['p-1']);
    const [top] = await queues.top(c, 1);
    expect(await queues.dequeue(c, top.id, top.score)).toBe(true);
    expect(await state(a, 'popped')).toBe('ready');
    for (const q of [b, c]) {
      const k = queueRedisKeys(prefix, q);
      expect([q, await direct.exists(k.parents), await direct.exists(k.outbox)]).toEqual([q, 0, 0]);
    }
    await queues.remove(a, 'popped');
  }, 30_000);

  it('across slots, a failed child fails its parent; an outcome applied twice counts once', async () => {
    const [a, b] = apart;
    await queues.enqueueFlow({
      queue: a,
      id: 'fp',
      children: [{ queue: b, id: 'fp-bad' }],
    });
    const [bad] = await queues.claim(b, 1);
    await queues.nack(bad, { maxAttempts: 1, error: new Error('declined') });
    expect(await queues.get(a, 'fp')).toMatchObject({
      state: 'dead',
      error: { name: 'FlowChildFailedError' },
    });

    await queues.enqueueFlow({
      queue: a,
      id: 'twice',
      children: [
        { queue: b, id: 'twice-1' },
        { queue: b, id: 'twice-2' },
      ],
    });
    const [one] = (await queues.claim(b, 2)).filter((t) => t.id === 'twice-1');
    await queues.ack(one, 'done');
    expect((await queues.get(a, 'twice'))?.children).toEqual({ total: 2, completed: 1, failed: 0 });
    // A replay of the same outcome (a crash after applying it, before removing it).
    const entry = JSON.stringify({
      q: a,
      p: 'twice',
      b: keyBase(queueRedisKeys(prefix, a)),
      m: 'fail-parent',
      c: `${b}:twice-1`,
      o: 'c',
      d: '"done"',
    });
    await direct.rpush(queueRedisKeys(prefix, b).outbox, entry);
    await queues.store.flows.applyOutboxes([b]);
    expect(await direct.llen(queueRedisKeys(prefix, b).outbox)).toBe(0);
    expect(await queues.get(a, 'twice')).toMatchObject({
      state: 'waiting-children',
      children: { total: 2, completed: 1, failed: 0 },
    });
  }, 60_000);

  it('across slots, a full queue refuses the flow: what was written is cancelled, nothing waits', async () => {
    const [a, b, c] = apart;
    await queues.setMaxSize(c, 1);
    afterThis = () => queues.setMaxSize(c, null);
    await queues.enqueue(c, 'occupant');
    const err = await queues
      .enqueueFlow({
        queue: a,
        id: 'refused',
        children: [
          { queue: b, id: 'refused-b' },
          { queue: c, id: 'refused-c' },
        ],
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueueFullError);
    expect(err).toMatchObject({ queue: c, size: 1, maxSize: 1 });
    // The parent's slot was written first: it ends cancelled, with the child written beside it.
    expect(await state(a, 'refused')).toBe('cancelled');
    expect(await state(b, 'refused-b')).toBe('cancelled');
    expect(await queues.get(c, 'refused-c')).toBeUndefined();
    expect((await queues.list(a, 'waiting-children')).map((t) => t.id)).not.toContain('refused');
  }, 60_000);

  it('a tree cut short between its slots: get names the missing children', async () => {
    const [a, b, c] = apart;
    await queues.enqueueFlow({
      queue: a,
      id: 'cut',
      children: [
        { queue: b, id: 'cut-b' },
        { queue: c, id: 'cut-c' },
      ],
    });
    // As if the writer crashed after the parent's slot: the child in c was never written.
    const kc = queueRedisKeys(prefix, c);
    await direct
      .multi()
      .hdel(kc.info, 'cut-c')
      .zrem(kc.due, 'cut-c')
      .hdel(kc.parents, 'cut-c')
      .exec();
    expect(await queues.get(a, 'cut')).toMatchObject({
      state: 'waiting-children',
      children: { total: 2, completed: 0, failed: 0, missing: [`${c}:cut-c`] },
    });
    // Cancelling the parent cancels the child that was written.
    expect(await queues.cancel(a, 'cut')).toBe('cancelled');
    expect(await state(b, 'cut-b')).toBe('cancelled');
  }, 60_000);

  it("across slots, a later call sent twice (its reply lost, as in a failover) is not taken for someone else's tasks", async () => {
    const [a, b] = apart;
    // A second instance reaches the master of b's slot through a proxy (ioredis' natMap) that
    // loses the reply to the flow's call there and closes the connection: the master ran it, and
    // the Cluster client sends it again (as a promoted replica that had its writes would run it).
    const port = await cluster.masterOfSlot(clusterKeySlot(`{${b}}`));
    const proxy = await startReplyCuttingProxy(`redis://${NODE_HOST}:${port}`);
    const via = new URL(proxy.url);
    const proxied = await createLockApp({
      redis: {
        cluster: cluster.startupNodes,
        options: {
          natMap: { [`${NODE_HOST}:${port}`]: { host: via.hostname, port: Number(via.port) } },
        },
      },
      keyPrefix: prefix,
      commandTimeoutMs: 2_000,
    });
    // The call in b's slot: its first node is a leaf (RESP bulk string of its id).
    const call = '$8\r\nresent-b\r\n';
    try {
      // A flow first, so that b's master has the script and the cut call is an EVALSHA that runs
      // (a NOSCRIPT answer would run nothing).
      await proxied.get(QueueService).enqueueFlow({
        queue: a,
        id: 'warm',
        children: [{ queue: b, id: 'warm-b' }],
      });
      proxy.cutAfter(call);
      await proxied.get(QueueService).enqueueFlow({
        queue: a,
        id: 'resent',
        children: [
          { queue: b, id: 'resent-b' },
          { queue: b, id: 'resent-b2' },
        ],
      });
      expect([proxy.cuts, proxy.seen(call)]).toEqual([1, 2]);
    } finally {
      await proxied.close();
      await proxy.close();
    }
    // Written once, whole, and waiting (before: a FlowError, the flow cancelled).
    expect(await queues.get(a, 'resent')).toMatchObject({
      state: 'waiting-children',
      children: { total: 2, completed: 0, failed: 0 },
    });
    expect(await state(b, 'resent-b')).toBe('ready');
    expect(await state(b, 'resent-b2')).toBe('ready');
    // Another call with the same ids is still refused: the id is this call's alone.
    await expect(
      queues.enqueueFlow({ queue: a, id: 'other', children: [{ queue: b, id: 'resent-b' }] }),
    ).rejects.toBeInstanceOf(FlowError);
  }, 60_000);

  it("across slots, a parent's deadline counts once its children finished: on a paused queue it expires, and one whose deadline is ahead runs after resume", async () => {
    const [parents, kids] = await onTwoMasters('deadline');
    await queues.pause(parents);
    afterThis = () => queues.resume(parents);
    work(parents);
    work(kids);
    const flow = (id: string, expiresInMs: number): FlowNode => ({
      queue: parents,
      id,
      options: { expiresInMs },
      children: [
        { queue: kids, id: `${id}-1` },
        { queue: kids, id: `${id}-2` },
      ],
    });
    await queues.enqueueFlow(flow('soon', 300));
    await queues.enqueueFlow(flow('later', 60_000));
    // The children's outcomes reach the parents through the outbox of the kids' queue.
    await waitFor('every child', async () => (await state(parents, 'later')) === 'ready', 10_000);
    // Made ready by the outcome applied in its slot, its deadline indexed in the same script.
    const expiries = queueRedisKeys(prefix, parents).expiries;
    expect(await direct.zscore(expiries, 'later')).not.toBeNull();
    // Within a round trip once its children finished (before, it stayed ready until resumed).
    await waitFor('expired, paused', async () => (await state(parents, 'soon')) === 'expired');
    expect(await queues.stats(parents)).toMatchObject({
      paused: true,
      ready: 1,
      waitingChildren: 0,
      expired: 1,
    });
    expect(await direct.zrange(expiries, 0, -1)).toEqual(['later']);
    await queues.resume(parents);
    await waitFor('the later one', async () => (await state(parents, 'later')) === 'completed');
    expect((await queues.get(parents, 'later'))?.result).toEqual({
      [`${kids}:later-1`]: `${kids}:later-1`,
      [`${kids}:later-2`]: `${kids}:later-2`,
    });
    expect(await direct.exists(expiries)).toBe(0);
    expect(await direct.exists(queueRedisKeys(prefix, kids).outbox)).toBe(0);
  }, 30_000);

  it('a replace keeps the options it does not give, and leaves a parent waiting for its children in another slot as it is', async () => {
    const [parents, kids] = await onTwoMasters('replace');
    const backoff = { type: 'fixed', delayMs: 5 } as const;
    // 16 digits: more than cjson.encode writes.
    const far = Number.MAX_SAFE_INTEGER;
    await queues.enqueue(kids, 'own', {
      name: 'welcome',
      delayMs: 60_000,
      maxAttempts: 1,
      backoff,
      timeoutMs: 500,
      expiresAt: far,
    });
    expect(await queues.enqueue(kids, 'own', { replace: true, timeoutMs: 700 })).toBe(0);
    const [own] = await queues.claim(kids);
    expect(own).toMatchObject({
      id: 'own',
      name: 'welcome',
      options: { maxAttempts: 1, backoff, timeoutMs: 700, expiresAt: far },
    });
    await queues.ack(own);

    await queues.enqueueFlow({
      queue: parents,
      id: 'p',
      payload: 'old',
      children: [{ queue: kids, id: 'p-kid' }],
    });
    expect(await queues.enqueue(parents, 'p', { replace: true, payload: 'new' })).toBe(0);
    expect(await queues.get(parents, 'p')).toMatchObject({
      state: 'waiting-children',
      payload: 'old',
    });
    expect(await queues.claim(parents)).toEqual([]);
    const [kid] = await queues.claim(kids);
    await queues.ack(kid, 'done');
    expect(await queues.get(parents, 'p')).toMatchObject({
      state: 'ready',
      payload: 'old',
      children: { total: 1, completed: 1, failed: 0 },
    });
    expect((await queues.claim(parents)).map((t) => t.id)).toEqual(['p']);
  }, 30_000);
});
