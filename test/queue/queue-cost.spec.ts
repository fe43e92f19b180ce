import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { QueueService, type EnqueueOptions } from '../../lib';
import {
  commandCalls,
  createLockApp,
  deferred,
  queueStats,
  waitFor,
  scriptsIn,
} from '../support/helpers';
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

  it('merges the enqueues that concurrent callers make in one tick into two script calls, each caller with its own outcome', async () => {
    const before = await commandCalls(probe);
    const added = await Promise.all(
      Array.from({ length: 50 }, (_, n) => queues.enqueue('burst', `id-${n}`, { payload: n })),
    );
    expect(added).toEqual(Array.from({ length: 50 }, () => 1));
    // Two scripts for the 50 (25 each: nothing else was in flight, so the first half comes back
    // while Redis runs the second): their fixed part twice (TIME, EXISTS, the bound, the tie
    // counter, the wake-up list; the first wakes the workers), the payloads and due scores with
    // one HSET and one ZADD per script, the rest (HSETNX: is the id new; its event) per task.
    expect(Object.fromEntries(await callsSince(probe, before))).toEqual({
      evalsha: 2,
      time: 2,
      exists: 2,
      hget: 2,
      get: 2,
      set: 2,
      llen: 2,
      rpush: 1,
      hsetnx: 50,
      hset: 2,
      zadd: 2,
      xadd: 50,
    });
    const popped = await queues.pop('burst', 50);
    // In the order of the calls (FIFO), each with its own payload.
    expect(popped.map((t) => [t.id, t.payload])).toEqual(
      Array.from({ length: 50 }, (_, n) => [`id-${n}`, n]),
    );
  });

  it('sends a merged batch as one call while another is in flight, as one call below 8 ids, in the order of the calls', async () => {
    const q = 'burst-in-flight';
    const enqueue = (from: number, count: number) =>
      Array.from({ length: count }, (_, n) =>
        queues.enqueue(q, `id-${from + n}`, { payload: from + n }),
      );
    const before = await commandCalls(probe);
    // Two calls, sent at the end of this tick.
    const first = enqueue(0, 50);
    // After they were sent and before any reply can be read (that needs the event loop's I/O
    // phase, which comes after every tick callback): one call of 50, both others in flight.
    await new Promise<void>((resolve) => process.nextTick(resolve));
    const second = enqueue(50, 50);
    expect(await Promise.all([...first, ...second])).toEqual(Array.from({ length: 100 }, () => 1));
    expect(scriptsIn(await callsSince(probe, before))).toBe(3);
    // Nothing in flight, 7 ids: one call.
    const third = await commandCalls(probe);
    expect(await Promise.all(enqueue(100, 7))).toEqual(Array.from({ length: 7 }, () => 1));
    expect(scriptsIn(await callsSince(probe, third))).toBe(1);
    const popped = await queues.pop(q, 107);
    expect(popped.map((t) => t.payload)).toEqual(Array.from({ length: 107 }, (_, n) => n));
  });

  it('in a merged call, a full queue refuses only the calls past its bound, and an id given twice is added once', async () => {
    await queues.setMaxSize('merged-bound', 30);
    try {
      const outcomes = await Promise.all(
        Array.from({ length: 40 }, (_, n) =>
          queues.enqueue('merged-bound', `id-${n % 35}`, { payload: n }).then(
            (added) => added,
            (err: Error) => err.name,
          ),
        ),
      );
      // Calls 0-29 add their id; 30-34 would pass the bound; 35-39 repeat ids 0-4 (not added).
      expect(outcomes).toEqual([
        ...Array.from({ length: 30 }, () => 1),
        ...Array.from({ length: 5 }, () => 'QueueFullError'),
        ...Array.from({ length: 5 }, () => 0),
      ]);
      expect(await queues.stats('merged-bound')).toMatchObject(queueStats({ ready: 30 }));
      const first = await queues.pop('merged-bound', 1);
      expect(first.map((t) => [t.id, t.payload])).toEqual([['id-0', 0]]);
    } finally {
      await queues.setMaxSize('merged-bound', null);
    }
  });

  it('keeps the order of calls on one queue when a call that is not merged comes between merged ones', async () => {
    const q = 'merged-order';
    const calls = [
      queues.enqueue(q, 'a', { payload: 'plain' }),
      queues.enqueue(q, 'a', { payload: 'replaced', replace: true }),
      queues.enqueue(q, 'b', { payload: 'plain', delayMs: 0 }),
      queues.enqueue(q, 'c', { payload: 'own options', maxAttempts: 2 }),
      queues.enqueue(q, 'd', { payload: 'plain' }),
    ];
    // 'a' is added first (1), then replaced (0 added), as when each call was sent alone.
    expect(await Promise.all(calls)).toEqual([1, 0, 1, 1, 1]);
    // The replace placed 'a' again (due now), before the calls made after it.
    const tasks = await queues.pop(q, 4);
    expect(tasks.map((t) => [t.id, t.payload])).toEqual([
      ['a', 'replaced'],
      ['b', 'plain'],
      ['c', 'own options'],
      ['d', 'plain'],
    ]);
  });

  it('keeps each event stream within eventsMaxLen + 200 entries, though a script trims only with its first event and every 100th', async () => {
    const capped = await createLockApp({ redis: server.url, queue: { eventsMaxLen: 1_000 } });
    try {
      const q = capped.get(QueueService);
      const stream = `queue:{capped}:events`;
      for (let call = 0; call < 5; call++) {
        // 1,000 ids in one call (1,000 events in one script), then 1,000 single calls merged.
        await q.enqueue(
          'capped',
          Array.from({ length: 1_000 }, (_, n) => `a${call}-${n}`),
        );
        expect(await probe.xlen(stream)).toBeLessThanOrEqual(1_200);
        await Promise.all(
          Array.from({ length: 1_000 }, (_, n) => q.enqueue('capped', `b${call}-${n}`)),
        );
        expect(await probe.xlen(stream)).toBeLessThanOrEqual(1_200);
      }
      expect(await probe.xlen(stream)).toBeGreaterThanOrEqual(1_000);
    } finally {
      await capped.close();
    }
  });

  /**
   * The commands of one worker step on queue `q`: 10 handlers end in one tick, one flush acks
   * them and leases the other 10 of 20 tasks enqueued with `options`.
   */
  async function workerStep(q: string, options: EnqueueOptions = {}) {
    await queues.enqueue(
      q,
      Array.from({ length: 20 }, (_, n) => `t${n}`),
      { payload: 1, ...options },
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
    // The 10 handlers end in one tick: one flush acks them and leases the other 10, as two calls
    // of 5 sent together (so that Redis runs the second while the worker starts the first 5).
    gates[0].resolve();
    await waitFor('the next 10 running', () => started.length === 20);
    const step = Object.fromEntries(await callsSince(probe, before));
    gates[1].resolve();
    await waitFor('drained', async () => (await queues.stats(q)).leased === 0);
    await worker.close();
    return step;
  }

  it('settles a batch of acks and leases as many with a few commands per key, not per task', async () => {
    const step = await workerStep('worker-step');
    // Per task only its two events (completed, active); every other command is one per key per
    // call of 5 (the acked tasks are kept with their results; their attempt counts are read and
    // written once per call, the fence with one SET ... GET; the read of the ready tasks takes one
    // more than it leases, to know whether any are left; one EXISTS asks whether any key of the
    // features this queue does not use exists: options, cancels, flows, priorities, groups).
    expect(step).toEqual({
      evalsha: 2,
      time: 2,
      hmget: 10,
      zrem: 4,
      hdel: 2,
      zrangebyscore: 6,
      zcard: 2,
      exists: 2,
      zadd: 4,
      hset: 6,
      set: 2,
      llen: 1,
      xadd: 20,
    });
  });

  it('costs tasks with a deadline (expiresInMs) a few commands per claim call, none per task', async () => {
    const withOptions = await workerStep('own-options', { maxAttempts: 3 });
    const withDeadline = await workerStep('deadline', { maxAttempts: 3, expiresInMs: 600_000 });
    const more: Record<string, number> = {};
    for (const name of new Set([...Object.keys(withOptions), ...Object.keys(withDeadline)])) {
      const d = (withDeadline[name] ?? 0) - (withOptions[name] ?? 0);
      if (d !== 0) more[name] = d;
    }
    // 2 claim calls leased 10 tasks: what the deadline adds is per call (the sweep's read of the
    // deadlines due, and one ZREM of the acked tasks' deadlines), not per task. (The EXISTS of the
    // expiries set is paid by every queue whose tasks have options, the deadline's or others: in
    // both steps.)
    expect(withDeadline.evalsha).toBe(2);
    expect(more).toEqual({ zrangebyscore: 2, zrem: 2 });
  });
});
