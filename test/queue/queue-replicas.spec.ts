import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { QueueError, QueueReplicationError, QueueService, RedisLockEvents } from '../../lib';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';
import { NODE_HOST } from '../support/redis-node';
import { startRedisServer, type RedisServer } from '../support/redis-server';

describe('QueueService replicated writes (waitForReplicas) on a real master and replica', () => {
  const prefix = uniquePrefix('queue-replicas');
  let master: RedisServer;
  let replica: RedisServer;
  let lone: RedisServer;
  let app: INestApplicationContext;
  let loneApp: INestApplicationContext;
  let queues: QueueService;
  let replicaClient: Redis;

  beforeAll(async () => {
    master = await startRedisServer();
    replica = await startRedisServer(['--replicaof', NODE_HOST, String(master.port)]);
    lone = await startRedisServer();
    replicaClient = redisClient(replica.url);
    await waitFor(
      'the replica in sync',
      async () => /master_link_status:up/.test(await replicaClient.info('replication')),
      20_000,
    );
    // The master's side too: the replica online, and one write it acknowledged (its first
    // acknowledgement can take longer than the 300 ms the tests allow on a loaded machine).
    const masterClient = redisClient(master.url);
    try {
      await waitFor('the master sees the replica online', async () =>
        /slave0:.*state=online/.test(await masterClient.info('replication')),
      );
      await masterClient.set(`${prefix}warm-up`, '1');
      expect(await masterClient.wait(1, 10_000)).toBe(1);
    } finally {
      masterClient.disconnect();
    }
    app = await createLockApp({
      redis: master.url,
      keyPrefix: prefix,
      queue: { waitForReplicas: { replicas: 1, timeoutMs: 300 } },
    });
    queues = app.get(QueueService);
    loneApp = await createLockApp({
      redis: lone.url,
      keyPrefix: prefix,
      queue: { waitForReplicas: { replicas: 1, timeoutMs: 300 } },
    });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await loneApp?.close();
    replicaClient?.disconnect();
    await Promise.all([master, replica, lone].map((s) => s?.stop()));
  });

  it('enqueue and ack return once the replica acknowledged: the replica holds the task, then its result', async () => {
    expect(await queues.enqueue('r', 'a', { payload: { n: 1 } })).toBe(1);
    const k = queueRedisKeys(prefix, 'r');
    // WAIT returned 1: the replica has applied the write already.
    expect(await replicaClient.hget(k.payload, 'a')).toBe('{"n":1}');
    const [task] = await queues.claim('r');
    expect(await queues.ack(task, { ok: true })).toBe(true);
    expect(await replicaClient.hget(k.results, 'a')).toMatch(/^\d+\|\{"ok":true\}$/);
  });

  it('with the replica frozen, enqueue throws QueueReplicationError (sent: the task is on the master)', async () => {
    replica.process.kill('SIGSTOP');
    try {
      const err = await queues.enqueue('r', 'b').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(QueueReplicationError);
      expect(err).toMatchObject({
        queue: 'r',
        operation: 'enqueue',
        acknowledged: 0,
        required: 1,
        timeoutMs: 300,
        sent: true,
      });
      expect((err as Error).message).toContain('may be lost on failover');
      // On the master all the same: enqueueing it again is safe (deduplicated).
      expect((await queues.get('r', 'b'))?.state).toBe('ready');
      // Per call, false opts out.
      expect(await queues.enqueue('r', 'c', { waitForReplicas: false })).toBe(1);
    } finally {
      replica.process.kill('SIGCONT');
    }
  });

  it('an ack the frozen replica did not acknowledge keeps the task its call leased: it runs, none ends dead', async () => {
    await queues.enqueue('held', ['h1', 'h2', 'h3'], { waitForReplicas: false });
    const ran: string[] = [];
    // Concurrency 1: h1's ack call leases h2 in its place, and that ack is not acknowledged.
    const worker = queues.process(
      'held',
      async (task) => {
        ran.push(task.id);
        if (task.id === 'h1') replica.process.kill('SIGSTOP');
        if (task.id === 'h2') replica.process.kill('SIGCONT');
      },
      { concurrency: 1, maxAttempts: 1, leaseMs: 2_000 },
    );
    try {
      await waitFor('all three ran', () => ran.length === 3, 10_000);
    } finally {
      replica.process.kill('SIGCONT');
      await worker.close();
    }
    expect(ran).toEqual(['h1', 'h2', 'h3']);
    expect(await queues.stats('held')).toMatchObject({ ready: 0, leased: 0, dead: 0 });
  });

  it('keeps the order of calls made in one tick when the first counts replicas first and the next does not wait', async () => {
    const q = 'ordered';
    for (let round = 0; round < 3; round++) {
      // The replica count is taken again (every 5 s): the first call waits for INFO first.
      (queues.store as unknown as { replicaCount?: unknown }).replicaCount = undefined;
      const first = queues.enqueue(q, `first-${round}`);
      const second = queues.enqueue(q, `second-${round}`, { waitForReplicas: false });
      await Promise.all([first, second]);
      expect((await queues.claim(q, 2)).map((t) => t.id)).toEqual([
        `first-${round}`,
        `second-${round}`,
      ]);
    }
  });

  it('on a master without replicas, fails fast without sending the write', async () => {
    const lonely = loneApp.get(QueueService);
    const err = await lonely.enqueue('r', 'x').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(QueueReplicationError);
    expect(err).toMatchObject({ acknowledged: 0, required: 1, sent: false });
    expect((err as Error).message).toContain('has 0 connected replica(s)');
    expect(await lonely.get('r', 'x')).toBeUndefined();
  });

  it("on a master without replicas, a worker's ack is sent all the same: the task completes once, with its result", async () => {
    const lonely = loneApp.get(QueueService);
    const errors: unknown[] = [];
    const off = loneApp
      .get(RedisLockEvents)
      .on('worker.error', ({ operation, error }) => errors.push([operation, error]));
    await lonely.enqueue('acked', 'a1', { waitForReplicas: false });
    let runs = 0;
    const worker = lonely.process(
      'acked',
      async () => {
        runs++;
        return 'done';
      },
      { maxAttempts: 1, leaseMs: 1_000 },
    );
    try {
      await waitFor(
        'a1 finished',
        async () => (await lonely.get('acked', 'a1'))?.state !== 'leased',
      );
    } finally {
      await worker.close();
      off();
    }
    expect(await lonely.get('acked', 'a1')).toMatchObject({ state: 'completed', result: 'done' });
    expect(runs).toBe(1);
    // The shortfall is told: sent, without a WAIT that could only time out.
    expect(errors).toHaveLength(1);
    expect((errors[0] as [string, unknown])[0]).toBe('ack');
    expect((errors[0] as [string, unknown])[1]).toMatchObject({
      acknowledged: 0,
      required: 1,
      sent: true,
      timeoutMs: 0,
    });
  });

  it('on a master without replicas, an ack that throws QueueReplicationError (sent) counts in the history as completed', async () => {
    const lonely = loneApp.get(QueueService);
    await lonely.enqueue('counted', ['c1', 'c2'], { waitForReplicas: false });
    const [first, second] = await lonely.claim('counted', 2);
    expect(await lonely.ack(first, 'ok', { waitForReplicas: false })).toBe(true);
    await expect(lonely.ack(second, 'ok')).rejects.toMatchObject({
      name: 'QueueReplicationError',
      sent: true,
    });
    expect(await lonely.get('counted', 'c2')).toMatchObject({ state: 'completed' });
    await lonely.store.metrics.flush(true);
    const points = await lonely.metrics('counted');
    expect(points.reduce((n, p) => n + p.completed, 0)).toBe(2);
  });

  it('rejects a bad waitForReplicas naming the option', async () => {
    for (const bad of [{ replicas: 0, timeoutMs: 10 }, { replicas: 1 }, 'yes']) {
      await expect(
        queues.enqueue('r', 'z', { waitForReplicas: bad as never }),
      ).rejects.toBeInstanceOf(QueueError);
    }
  });
});
