import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { QueueService } from '../../lib';
import { commandCalls, createLockApp, deferred, queueStats, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/** Calls of each command the server ran since `before` (commands inside scripts included). */
async function callsSince(
  client: Redis,
  before: Map<string, number>,
): Promise<Map<string, number>> {
  const after = await commandCalls(client);
  const delta = new Map<string, number>();
  for (const [name, calls] of after) {
    const n = calls - (before.get(name) ?? 0);
    if (n > 0 && name !== 'info') delta.set(name, n);
  }
  return delta;
}

describe('QueueService: what enqueue and a worker step cost (dedicated redis-server)', () => {
  let server: RedisServer;
  let app: INestApplicationContext;
  let queues: QueueService;
  /** The module's own command client (passed in, so the test can watch its socket). */
  let client: Redis;
  let probe: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    client = new Redis(server.url);
    probe = new Redis(server.url);
    app = await createLockApp({ redis: client });
    queues = app.get(QueueService);
    // Loads the script, so that no NOSCRIPT retry is counted below.
    await queues.enqueue('warm-up', 'x');
  });
  afterAll(async () => {
    await app.close();
    client.disconnect();
    probe.disconnect();
    await server.stop();
  });

  it('adds a new id with one script that runs 10 commands, its event, FIFO tie order and size bound included (11 when it wakes the workers)', async () => {
    await queues.enqueue('cost', 'first', { payload: 1 });
    const before = await commandCalls(probe);
    for (let n = 0; n < 10; n++)
      expect(await queues.enqueue('cost', `id-${n}`, { payload: n })).toBe(1);
    // The wake-up marker is still there (no worker took it): no RPUSH.
    expect(Object.fromEntries(await callsSince(probe, before))).toEqual({
      evalsha: 10,
      time: 10,
      exists: 10,
      hsetnx: 10,
      hset: 10,
      zadd: 10,
      llen: 10,
      xadd: 10,
      get: 10,
      set: 10,
      hget: 10,
    });
    expect(await queues.stats('cost')).toMatchObject(queueStats({ ready: 11 }));
  });

  it('sends the enqueues that concurrent callers make in one tick 4 to a socket write, after the first', async () => {
    const stream = client.stream;
    const writes = jest.spyOn(stream, '_write');
    const batches = jest.spyOn(stream, '_writev');
    try {
      const added = await Promise.all(
        Array.from({ length: 50 }, (_, n) => queues.enqueue('burst', `id-${n}`, { payload: n })),
      );
      expect(added).toEqual(Array.from({ length: 50 }, () => 1));
      // The first leaves at once (nothing else was in flight); the 49 behind it go 4 to a write
      // (12 writes), and the last one alone at the end of the tick.
      expect(writes).toHaveBeenCalledTimes(2);
      expect(batches.mock.calls.map(([chunks]) => chunks.length)).toEqual(
        Array.from({ length: 12 }, () => 4),
      );
    } finally {
      writes.mockRestore();
      batches.mockRestore();
    }
    const popped = await queues.pop('burst', 50);
    expect(popped.map((t) => [t.id, t.payload]).sort()).toEqual(
      Array.from({ length: 50 }, (_, n) => [`id-${n}`, n]).sort(),
    );
  });

  it('settles a batch of acks and leases as many with a few commands per key, not per task', async () => {
    const q = 'worker-step';
    await queues.enqueue(
      q,
      Array.from({ length: 20 }, (_, n) => `t${n}`),
      { payload: 1 },
    );
    const gates = [deferred(), deferred()];
    const started: string[] = [];
    const worker = queues.process(
      q,
      async (task) => {
        started.push(task.id);
        await gates[started.length <= 10 ? 0 : 1].promise;
      },
      { concurrency: 10 },
    );
    await waitFor('the first 10 running', () => started.length === 10);
    const before = await commandCalls(probe);
    // The 10 handlers end in one tick: one flush acks them and leases the other 10.
    gates[0].resolve();
    await waitFor('the next 10 running', () => started.length === 20);
    const step = Object.fromEntries(await callsSince(probe, before));
    gates[1].resolve();
    await waitFor('drained', async () => (await queues.stats(q)).leased === 0);
    await worker.close();
    // Per task only HINCRBY (the attempt count) and its two events (completed, active); every
    // other command is one per key for all 10 (the acked tasks are kept with their results; one
    // EXISTS asks whether any task of the queue has a flow parent or an outbox).
    expect(step).toEqual({
      evalsha: 1,
      time: 1,
      hmget: 5,
      zrem: 2,
      hdel: 1,
      zrangebyscore: 4,
      zcard: 1,
      exists: 9,
      zadd: 2,
      hset: 2,
      get: 1,
      set: 1,
      hincrby: 10,
      xadd: 20,
    });
  });
});
