import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  QueueError,
  QueueRateLimitError,
  QueueService,
  RedisLockEvents,
  type RunningTask,
} from '../../lib';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';

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
