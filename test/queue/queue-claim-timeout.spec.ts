import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { QueueService, RedisLockEvents, RedisUnavailableError } from '../../lib';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { createLockApp, deferred, redisClient, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/**
 * A claim that outlives `commandTimeoutMs` is given up and tried again, but Redis runs it all
 * the same once a stall ends (or from ioredis's offline queue after a reconnect): the tasks it
 * leased go straight back, unattempted, instead of staying leased to nobody for `leaseMs` (and,
 * with `maxAttempts: 1`, dying "lease expired" without having run).
 */
describe('QueueWorker: a claim answered after commandTimeoutMs', () => {
  const prefix = uniquePrefix('queue-claim-timeout');
  let server: RedisServer;
  let app: INestApplicationContext;
  let queues: QueueService;
  let events: RedisLockEvents;

  beforeAll(async () => {
    server = await startRedisServer();
    app = await createLockApp({ redis: server.url, keyPrefix: prefix, commandTimeoutMs: 300 });
    queues = app.get(QueueService);
    events = app.get(RedisLockEvents);
  });
  afterAll(async () => {
    server.process.kill('SIGCONT');
    await app.close();
    await server.stop();
  });

  /** Counts the worker's failed claims of `queue` (`worker.error`, operation 'claim'). */
  function failedClaims(queue: string): { readonly count: number; off: () => void } {
    let count = 0;
    const off = events.on('worker.error', (e) => {
      if (e.queue === queue && e.operation === 'claim') count++;
    });
    return {
      get count() {
        return count;
      },
      off,
    };
  }

  it('gives back the tasks of the claims replayed after a stall: all run, at their first attempt', async () => {
    const queue = 'stalled';
    const ids = Array.from({ length: 30 }, (_, i) => `t${i}`);
    await queues.enqueue(queue, ids);
    const attempts = new Map<string, number[]>();
    const stalled = deferred();
    const claims = failedClaims(queue);
    // A lease far longer than the test: a task leased to nobody would not come back in it.
    const worker = queues.process(
      queue,
      async (task) => {
        attempts.set(task.id, [...(attempts.get(task.id) ?? []), task.attempt]);
        await stalled.promise;
      },
      { concurrency: 5, maxAttempts: 1, leaseMs: 30_000 },
    );
    try {
      await waitFor('5 tasks running', () => attempts.size === 5);
      server.process.kill('SIGSTOP');
      // The 5 handlers end: their ack-and-claim times out, then the claims after it.
      stalled.resolve();
      await waitFor('two claims given up', () => claims.count >= 2);
      server.process.kill('SIGCONT');
      await waitFor('every task ran', () => attempts.size === ids.length);
      await waitFor(
        'every task completed',
        async () => (await queues.stats(queue)).completed === ids.length,
      );
      expect([...attempts.values()].flat().every((a) => a === 1)).toBe(true);
      expect(await queues.deadLetters(queue)).toEqual([]);
    } finally {
      server.process.kill('SIGCONT');
      claims.off();
      await worker.close();
    }
  });

  it("counts the completions of an ack-and-claim answered late in the queue's metrics", async () => {
    const queue = 'late-acks';
    // An instance of its own: closing it writes its metrics.
    const own = await createLockApp({
      redis: server.url,
      keyPrefix: prefix,
      commandTimeoutMs: 300,
    });
    const ownQueues = own.get(QueueService);
    const ownClaims = (() => {
      let count = 0;
      own.get(RedisLockEvents).on('worker.error', (e) => {
        if (e.queue === queue && e.operation === 'ack') count++;
      });
      return () => count;
    })();
    await queues.enqueue(
      queue,
      Array.from({ length: 10 }, (_, i) => `a${i}`),
    );
    let started = 0;
    const stalled = deferred();
    ownQueues.process(
      queue,
      async () => {
        started++;
        await stalled.promise;
      },
      { concurrency: 5, leaseMs: 30_000 },
    );
    try {
      await waitFor('5 tasks running', () => started === 5);
      server.process.kill('SIGSTOP');
      // The 5 handlers end: their ack-and-claim times out; Redis runs it once it goes on.
      stalled.resolve();
      await waitFor('an ack given up', () => ownClaims() >= 1);
      server.process.kill('SIGCONT');
      await waitFor(
        'every task completed',
        async () => (await queues.stats(queue)).completed === 10,
      );
    } finally {
      server.process.kill('SIGCONT');
      await own.close();
    }
    const points = await queues.metrics(queue);
    expect(points.reduce((sum, p) => sum + p.completed, 0)).toBe(10);
  });

  it("takes the given-back tasks' starts out of the rate limiter: a rate-limited queue runs them after the stall", async () => {
    const queue = 'late-limited';
    const redis = redisClient(server.url);
    await queues.enqueue(queue, ['l0', 'l1', 'l2', 'l3']);
    const ran: string[] = [];
    const claims = failedClaims(queue);
    server.process.kill('SIGSTOP');
    // 4 starts per 10 minutes: the late claims' leases alone would fill the window.
    const worker = queues.process(queue, async (task) => void ran.push(task.id), {
      concurrency: 4,
      leaseMs: 30_000,
      limiter: { max: 4, durationMs: 600_000 },
    });
    try {
      await waitFor('a claim given up', () => claims.count >= 1);
      server.process.kill('SIGCONT');
      await waitFor('the 4 tasks ran', () => ran.length === 4);
      // The window holds the 4 starts that ran, none of the leases given back unstarted.
      expect(await redis.zcard(queueRedisKeys(prefix, queue).limiter)).toBe(4);
    } finally {
      server.process.kill('SIGCONT');
      claims.off();
      await worker.close();
      redis.disconnect();
    }
  });

  it("counts acks, nacks and cancels made through QueueService and answered late in the queue's metrics", async () => {
    const queue = 'late-manual';
    // An instance of its own: closing it writes its metrics.
    const own = await createLockApp({
      redis: server.url,
      keyPrefix: prefix,
      commandTimeoutMs: 300,
    });
    const ownQueues = own.get(QueueService);
    const admin = redisClient(server.url);
    try {
      await ownQueues.enqueue(queue, ['m1', 'm2', 'm3']);
      const [t1, t2] = await ownQueues.claim(queue, 2);
      // Writes (scripts) wait longer than commandTimeoutMs; the cancel's read of a flow record,
      // sent first, goes through. Redis runs the three once the pause ends.
      await admin.call('CLIENT', 'PAUSE', '1000', 'WRITE');
      const outcomes = await Promise.allSettled([
        ownQueues.cancel(queue, 'm3'),
        ownQueues.ack(t1, 'done'),
        ownQueues.nack(t2, { maxAttempts: 1 }),
      ]);
      for (const o of outcomes) {
        expect((o as PromiseRejectedResult).reason).toBeInstanceOf(RedisUnavailableError);
      }
      // On the same connection: answered after the three late replies.
      await waitFor('Redis to run them', async () => {
        const s = await ownQueues.stats(queue).catch(() => undefined);
        return s?.completed === 1 && s.dead === 1 && s.cancelled === 1;
      });
    } finally {
      admin.disconnect();
      await own.close();
    }
    const points = await queues.metrics(queue);
    const sum = (field: 'completed' | 'dead' | 'cancelled') =>
      points.reduce((n, p) => n + p[field], 0);
    expect([sum('completed'), sum('dead'), sum('cancelled')]).toEqual([1, 1, 1]);
  });

  it('gives them back also when the worker was closed before the reply came', async () => {
    const queue = 'closed';
    await queues.enqueue(
      queue,
      Array.from({ length: 10 }, (_, i) => `c${i}`),
    );
    let runs = 0;
    const claims = failedClaims(queue);
    server.process.kill('SIGSTOP');
    const worker = queues.process(queue, async () => void runs++, {
      concurrency: 5,
      leaseMs: 30_000,
    });
    try {
      await waitFor('a claim given up', () => claims.count >= 1);
      await worker.close();
    } finally {
      server.process.kill('SIGCONT');
      claims.off();
    }
    // The claims the closed worker sent ran once Redis went on: their tasks are back, ready.
    await waitFor('the tasks given back', async () => {
      const s = await queues.stats(queue);
      return s.leased === 0 && s.ready === 10;
    });
    expect(runs).toBe(0);
  });
});
