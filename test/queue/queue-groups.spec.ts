import 'reflect-metadata';
import type { ChildProcess } from 'node:child_process';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { QueueService } from '../../lib';
import { exited } from '../support/child';
import { createLockApp, redisClient, uniquePrefix, waitFor, queueStats } from '../support/helpers';
import {
  jainIndex,
  spawnFeatureWorkers,
  type FeatureWorker,
} from '../support/queue-feature-workers';

describe('QueueService groups across 3 worker processes × concurrency 8', () => {
  const prefix = uniquePrefix('queue-groups');
  const GROUPS = 30;
  const PER_GROUP = 40;
  const TOTAL = GROUPS * PER_GROUP;
  const options = { concurrency: 8, groupConcurrency: 1, leaseMs: 1_000 };
  const workers: FeatureWorker[] = [
    { queue: 'plain-run', options },
    { queue: 'crash-run', options },
  ];
  let app: INestApplicationContext;
  let queues: QueueService;
  let redis: Redis;
  let children: ChildProcess[];
  const obs = (queue: string, part: string) => `${prefix}obs:${queue}:${part}`;
  const groupIds = (queue: string, g: number) =>
    Array.from({ length: PER_GROUP }, (_, i) => `${queue}-g${g}-${i}`);

  /** Enqueues every group's tasks, group after group, while the queue is paused; then resumes. */
  const enqueueAll = async (queue: string) => {
    await queues.pause(queue);
    for (let g = 0; g < GROUPS; g++) {
      await queues.enqueue(queue, groupIds(queue, g), {
        group: `g${g}`,
        payload: { group: `g${g}` },
      });
    }
    await queues.resume(queue);
  };
  const completed = (queue: string) => redis.llen(obs(queue, 'done'));
  // Handlers sleep 5–10 ms: long against a loaded machine's hiccups (the groups a stalled process
  // holds fall behind whatever the scheduler does), and alike enough that a group's progress
  // measures its turns rather than its luck with handler times.
  const spawnWorkers = () =>
    spawnFeatureWorkers(prefix, workers, { MIN_HANDLER_MS: '5', MAX_HANDLER_MS: '10' });

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    queues = app.get(QueueService);
    redis = redisClient();
    children = await Promise.all([0, 1, 2].map(() => spawnWorkers()));
    // Three children compiling the library at once: seconds each on a loaded 2-core machine.
  }, 120_000);
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await app.close();
    redis.disconnect();
  });

  it('runs each group strictly in order, one task at a time, and serves the groups round-robin (Jain ≥ 0.95)', async () => {
    const q = 'plain-run';
    await enqueueAll(q);
    await waitFor('every task done', async () => (await completed(q)) === TOTAL, 30_000, 20);
    expect(Number(await redis.get(obs(q, 'overlaps')))).toBe(0);
    for (let g = 0; g < GROUPS; g++) {
      expect(await redis.lrange(obs(q, `order:g${g}`), 0, -1)).toEqual(groupIds(q, g));
    }
    // Progress of the groups at half, three quarters and nine tenths of the run: a FIFO queue
    // would have run the first groups only (index 0.5, 0.75, 0.9).
    const order = await redis.lrange(obs(q, 'done'), 0, -1);
    for (const share of [0.5, 0.75, 0.9]) {
      const counts = new Map<string, number>();
      for (const group of order.slice(0, TOTAL * share)) {
        counts.set(group, (counts.get(group) ?? 0) + 1);
      }
      const perGroup = Array.from({ length: GROUPS }, (_, g) => counts.get(`g${g}`) ?? 0);
      expect(jainIndex(perGroup)).toBeGreaterThanOrEqual(0.95);
    }
    expect(await queues.stats(q)).toMatchObject(queueStats());
  });

  it('loses no task and keeps each group in order when 2 worker processes are SIGKILLed', async () => {
    const q = 'crash-run';
    await enqueueAll(q);
    for (const [victim, after] of [
      [0, TOTAL / 4],
      [1, TOTAL / 2],
    ]) {
      await waitFor(`${after} done`, async () => (await completed(q)) >= after, 30_000, 10);
      children[victim].kill('SIGKILL');
      expect(await exited(children[victim])).toBe('SIGKILL');
      children[victim] = await spawnWorkers();
    }
    await waitFor(
      'every task acked',
      async () => {
        const s = await queues.stats(q);
        return s.ready + s.delayed + s.leased === 0;
      },
      30_000,
      50,
    );
    expect((await queues.stats(q)).dead).toBe(0);
    for (let g = 0; g < GROUPS; g++) {
      const ran = await redis.lrange(obs(q, `order:g${g}`), 0, -1);
      // A killed worker's task may run again, right after its first run: never out of order.
      const once = ran.filter((id, i) => id !== ran[i - 1]);
      expect(once).toEqual(groupIds(q, g));
    }
  }, 150_000); // two worker processes start again (ts-node) and three waits of up to 30 s each
});
