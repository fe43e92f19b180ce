import 'reflect-metadata';
import type { ChildProcess } from 'node:child_process';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { QueueService } from '../../lib';
import { createLockApp, redisClient, redisTimeMs, uniquePrefix, waitFor } from '../support/helpers';
import { spawnFeatureWorkers, type FeatureWorker } from '../support/queue-feature-workers';

describe('QueueService limits shared by 3 worker processes × concurrency 10', () => {
  const prefix = uniquePrefix('queue-limits');
  const LIMIT = { max: 100, durationMs: 1_000 };
  const RUN_MS = 10_000;
  const GLOBAL = 5;
  const workers: FeatureWorker[] = [
    { queue: 'limited', options: { concurrency: 10, limiter: LIMIT } },
    { queue: 'global', options: { concurrency: 10 } },
  ];
  let app: INestApplicationContext;
  let queues: QueueService;
  let redis: Redis;
  let children: ChildProcess[];
  const obs = (queue: string, part: string) => `${prefix}obs:${queue}:${part}`;
  const ids = (queue: string, n: number) => Array.from({ length: n }, (_, i) => `${queue}-${i}`);

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    queues = app.get(QueueService);
    redis = redisClient();
    children = await Promise.all(
      [0, 1, 2].map(() =>
        spawnFeatureWorkers(prefix, workers, { INSIDE_LIMIT: String(GLOBAL), MAX_HANDLER_MS: '4' }),
      ),
    );
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await app.close();
    redis.disconnect();
  });

  it('rate limit 100 per 1 s over 10 s: no sliding 1 s window above 100, and at least 95 % of the limit used', async () => {
    const q = 'limited';
    const all = ids(q, 1_200);
    for (const part of [all.slice(0, 600), all.slice(600)]) {
      await queues.enqueue(q, part, { payload: {} });
    }
    await waitFor('first start', async () => (await redis.llen(obs(q, 'starts'))) > 0);
    const [first] = await redis.lrange(obs(q, 'starts'), 0, 0);
    const t0 = Number(first);
    await waitFor(
      'the 10 s run',
      async () => (await redisTimeMs(redis)) > t0 + RUN_MS + 200,
      RUN_MS + 10_000,
      100,
    );
    await queues.pause(q);
    // Claim times on the Redis clock (what the limiter counts), sorted.
    const starts = (await redis.lrange(obs(q, 'starts'), 0, -1)).map(Number).sort((a, b) => a - b);
    let busiest = 0;
    for (let i = 0, j = 0; i < starts.length; i++) {
      while (starts[j] < starts[i] - LIMIT.durationMs + 1) j++;
      busiest = Math.max(busiest, i - j + 1);
    }
    expect(busiest).toBeLessThanOrEqual(LIMIT.max);
    const inRun = starts.filter((t) => t >= t0 && t < t0 + RUN_MS).length;
    expect(inRun).toBeGreaterThanOrEqual(0.95 * LIMIT.max * (RUN_MS / LIMIT.durationMs));
  }, 40_000);

  it('global concurrency 5: never more than 5 tasks leased at once (sampled) or running', async () => {
    const q = 'global';
    const TASKS = 300;
    await queues.setGlobalConcurrency(q, GLOBAL);
    await queues.enqueue(q, ids(q, TASKS), { payload: {} });
    let maxLeased = 0;
    await waitFor(
      'every task done',
      async () => {
        maxLeased = Math.max(maxLeased, (await queues.stats(q)).leased);
        return (await redis.llen(obs(q, 'done'))) === TASKS;
      },
      30_000,
      1,
    );
    expect(maxLeased).toBe(GLOBAL);
    expect(Number(await redis.get(obs(q, 'over')))).toBe(0);
    await queues.setGlobalConcurrency(q, null);
  });
});
