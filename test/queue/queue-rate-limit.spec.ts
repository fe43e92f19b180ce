import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  QueueError,
  QueueRateLimitError,
  QueueService,
  RedisLockEvents,
  type RunningTask,
  type WorkerRateLimit,
} from '../../lib';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { createLockApp, deferred, redisClient, uniquePrefix, waitFor } from '../support/helpers';

describe('QueueService: rate limits at runtime (BullMQ rateLimit / RateLimitError)', () => {
  const prefix = uniquePrefix('queue-rate');
  let app: INestApplicationContext;
  let queues: QueueService;
  let redis: Redis;
  let n = 0;
  const fresh = () => `rl-${n++}`;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  /** Resolves once the queue's idle workers took the wake-up marker (they claimed and found nothing). */
  const markerTaken = (q: string) =>
    waitFor(
      'the workers to look',
      async () => (await redis.llen(queueRedisKeys(prefix, q).wake)) === 0,
    );

  it('a handler throwing QueueRateLimitError(ms): its task back unspent, no failure, the queue takes nothing until lifted', async () => {
    const q = fresh();
    const runs: string[] = [];
    const failed: string[] = [];
    app.get(RedisLockEvents).on('task.failed', ({ queue, id }) => {
      if (queue === q) failed.push(id);
    });
    let limited = false;
    queues.process(
      q,
      async (task: RunningTask) => {
        runs.push(`${task.id}:${task.attempt}`);
        if (!limited) {
          limited = true;
          throw new QueueRateLimitError(60_000); // the provider answered 429
        }
        return 'done';
      },
      { concurrency: 1, maxAttempts: 1 },
    );
    await queues.enqueue(q, 'a');
    await waitFor('the rate limit', async () => (await queues.rateLimitTtl(q)) > 0);
    const ttl = await queues.rateLimitTtl(q);
    expect(ttl).toBeGreaterThan(55_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
    // A shorter limit set from elsewhere (a webhook, an operator) keeps the provider's longer one.
    await queues.rateLimit(q, 100);
    expect(await queues.rateLimitTtl(q)).toBeGreaterThan(55_000);
    await queues.enqueue(q, 'b');
    await markerTaken(q);
    // A claim of ours is refused like the workers' are.
    expect(await queues.claim(q, 5)).toEqual([]);
    expect(runs).toEqual(['a:1']);
    expect(await queues.stats(q)).toMatchObject({ ready: 2, leased: 0, dead: 0 });
    expect(await queues.get(q, 'a')).toMatchObject({ state: 'ready', attempts: 0 });

    await queues.rateLimit(q, 0);
    expect(await queues.rateLimitTtl(q)).toBe(0);
    await waitFor(
      'both done',
      async () => (await queues.stats(q)).ready === 0 && runs.length === 3,
    );
    // maxAttempts 1, and 'a' still completed: the rate-limited run spent nothing.
    expect(runs).toEqual(['a:1', 'a:1', 'b:1']);
    expect(await queues.get(q, 'a')).toMatchObject({ state: 'completed', attempts: 1 });
    expect(failed).toEqual([]);
  });

  it('queues.rateLimit(queue, ms) from anywhere: no worker takes a task until it ends or is lifted', async () => {
    const q = fresh();
    const runs: string[] = [];
    queues.process(q, async (task: RunningTask) => void runs.push(task.id));
    await queues.rateLimit(q, 60_000);
    await queues.enqueue(q, ['x', 'y']);
    await markerTaken(q);
    expect(await queues.claim(q, 5)).toEqual([]);
    expect(runs).toEqual([]);
    expect(await queues.stats(q)).toMatchObject({ ready: 2 });
    await queues.rateLimit(q, 0);
    await waitFor('both run', () => runs.length === 2);
  });

  it('setRateLimit: one limiter for every worker on every instance, changed live without resetting what was counted', async () => {
    const q = fresh();
    // A second instance of the app; the workers of both have no limiter of their own.
    const other = await createLockApp({ keyPrefix: prefix });
    const otherQueues = other.get(QueueService);
    try {
      const runs: string[] = [];
      const handler = (instance: string) => async (task: RunningTask) =>
        void runs.push(`${instance}:${task.id}`);
      queues.process(q, handler('a'), { concurrency: 2 });
      otherQueues.process(q, handler('b'), { concurrency: 2 });
      expect(await otherQueues.getRateLimit(q)).toBeNull();
      await queues.setRateLimit(q, { max: 3, durationMs: 600_000 });
      expect(await otherQueues.getRateLimit(q)).toEqual({ max: 3, durationMs: 600_000 });
      expect(await queues.rateLimitTtl(q)).toBe(0);
      await otherQueues.enqueue(
        q,
        Array.from({ length: 10 }, (_, i) => `t${i}`),
      );
      await waitFor('3 starts', () => runs.length === 3);
      await markerTaken(q);
      // The window is full: no worker of either instance, nor a claim of ours, takes a fourth.
      expect(await otherQueues.claim(q, 5)).toEqual([]);
      expect(runs).toHaveLength(3);
      const ttl = await otherQueues.rateLimitTtl(q);
      expect(ttl).toBeGreaterThan(500_000);
      expect(ttl).toBeLessThanOrEqual(600_000);

      // Raised to 5 from the other instance: the 3 starts stay counted, 2 more run at once.
      await otherQueues.setRateLimit(q, { max: 5, durationMs: 600_000 });
      await waitFor('5 starts', () => runs.length === 5);
      await markerTaken(q);
      expect(await queues.claim(q, 5)).toEqual([]);
      expect(runs).toHaveLength(5);
      expect(await queues.stats(q)).toMatchObject({ ready: 5 });

      // Removed: the workers' own (none) apply again, and the rest runs.
      await queues.setRateLimit(q, null);
      expect(await otherQueues.getRateLimit(q)).toBeNull();
      expect(await queues.rateLimitTtl(q)).toBe(0);
      await waitFor('all 10 run', () => runs.length === 10);
      expect(new Set(runs.map((r) => r.slice(2)))).toHaveProperty('size', 10);
    } finally {
      await other.close();
    }
  });

  it('setRateLimit: a lowered limit counts the starts already in the window', async () => {
    const q = fresh();
    const runs: string[] = [];
    queues.process(q, async (task: RunningTask) => void runs.push(task.id), { concurrency: 4 });
    await queues.setRateLimit(q, { max: 4, durationMs: 600_000 });
    await queues.enqueue(q, ['a', 'b', 'c', 'd', 'e', 'f']);
    await waitFor('4 starts', () => runs.length === 4);
    // 4 started in the window: lowered to 2, nothing fits until 3 of them left it.
    await queues.setRateLimit(q, { max: 2, durationMs: 600_000 });
    await markerTaken(q);
    expect(await queues.claim(q, 5)).toEqual([]);
    expect(runs).toHaveLength(4);
    expect(await queues.rateLimitTtl(q)).toBeGreaterThan(500_000);
    await queues.setRateLimit(q, null);
    await waitFor('all 6 run', () => runs.length === 6);
  });

  /**
   * Runs `body` while a worker without a name (it runs every task) is busy with the task
   * 'blocker' until `gate` opens, and a worker of name 'a' on the same queue claims the tasks of
   * name 'b' and passes them on unstarted (the documented rolling-deploy pass-on).
   */
  async function withPassOn(
    q: string,
    options: { groupLimiter?: WorkerRateLimit },
    body: (ran: string[], gate: () => void, closeA: () => Promise<void>) => Promise<void>,
  ): Promise<void> {
    const gate = deferred();
    const ran: string[] = [];
    const other = queues.process(
      q,
      async (task: RunningTask) => {
        if (task.id === 'blocker') await gate.promise;
        ran.push(task.id);
      },
      { concurrency: 1, ...options },
    );
    let a: { close(): Promise<void> } | undefined;
    try {
      await queues.enqueue(q, 'blocker');
      await waitFor('blocker running', async () => (await queues.stats(q)).leased === 1);
      await waitFor('the other worker registered', async () =>
        (await queues.workers(q)).some((w) => w.names.length === 0),
      );
      a = queues.process(q, (task) => void ran.push(`a:${task.id}`), {
        name: 'a',
        concurrency: 3,
        ...options,
      });
      await body(ran, gate.resolve, async () => a?.close());
    } finally {
      gate.resolve();
      await Promise.all([a?.close(), other.close()]);
    }
  }

  it('a task passed on unstarted to the workers of its name takes its start back: the window holds max starts that ran', async () => {
    const q = fresh();
    const limiter = queueRedisKeys(prefix, q).limiter;
    await queues.setRateLimit(q, { max: 4, durationMs: 600_000 });
    await withPassOn(q, {}, async (ran, openGate, closeA) => {
      await queues.enqueue(q, ['b1', 'b2', 'b3'], { name: 'b' });
      await waitFor('the 3 passed on', async () => (await queues.stats(q)).delayed === 3);
      // Only the blocker started: the 3 leases 'a' gave back left the window (4 entries before).
      expect(await redis.zcard(limiter)).toBe(1);
      expect(await queues.rateLimitTtl(q)).toBe(0);
      await closeA();
      openGate();
      await waitFor('the b tasks ran', () => ran.length === 4);
      expect(ran.sort()).toEqual(['b1', 'b2', 'b3', 'blocker']);
      expect(await redis.zcard(limiter)).toBe(4);
    });
  });

  it("a grouped task passed on unstarted takes its start back from its group's window (groupLimiter)", async () => {
    const q = fresh();
    const k = queueRedisKeys(prefix, q);
    const groupLimiter = { max: 1, durationMs: 600_000 };
    await withPassOn(q, { groupLimiter }, async (ran, openGate, closeA) => {
      await queues.enqueue(q, 'g1', { name: 'b', group: 'g' });
      // Passed on: only the blocker leased, and the group waiting (parked) for g1's due time.
      await waitFor(
        'g1 passed on',
        async () =>
          (await queues.stats(q)).leased === 1 && (await redis.zscore(k.gpark, 'g')) !== null,
      );
      // The window of 'g' counts no start, and the group waits for the pass-on's delay only, not
      // for the end of a full window (600 s).
      expect(await redis.hget(k.glimit, 'g')).toMatch(/\|0$/);
      const parkedFor = Number(await redis.zscore(k.gpark, 'g')) - Date.now();
      expect(parkedFor).toBeLessThan(60_000);
      await closeA();
      openGate();
      await waitFor('g1 ran', () => ran.includes('g1'));
      expect(await redis.hget(k.glimit, 'g')).toMatch(/\|1$/);
    });
  });

  it('setRateLimit refuses a bad limit with a QueueError naming the field', async () => {
    const bad: Array<[unknown, RegExp]> = [
      [{ max: 0, durationMs: 1_000 }, /'limit\.max'/],
      [{ max: 1_000_001, durationMs: 1_000 }, /'limit\.max'/],
      [{ max: 2, durationMs: 0 }, /'limit\.durationMs'/],
      [{ max: 2, durationMs: 86_400_001 }, /'limit\.durationMs'/],
      [{ max: 2, durationMs: 1.5 }, /'limit\.durationMs'/],
      [{ max: 2, durationMs: 1_000, duration: 1 }, /'limit\.duration'/],
      [undefined, /'limit'/],
      [5, /'limit'/],
    ];
    for (const [limit, message] of bad) {
      const err = await queues
        .setRateLimit('any', limit as WorkerRateLimit)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(QueueError);
      expect((err as Error).message).toMatch(message);
    }
    expect(await queues.getRateLimit('any')).toBeNull();
  });

  it('refuses a bad ms with a QueueError naming it', async () => {
    for (const ms of [-1, 1.5, 86_400_001, Number.NaN]) {
      await expect(queues.rateLimit('any', ms)).rejects.toThrow(/'ms'/);
    }
    for (const ms of [0, 86_400_001, 2.5]) {
      expect(() => new QueueRateLimitError(ms)).toThrow(QueueError);
    }
    expect(new QueueRateLimitError(1_000)).toMatchObject({
      ms: 1_000,
      name: 'QueueRateLimitError',
    });
  });
});
