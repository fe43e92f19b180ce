import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { QueueService } from '../../lib';
import { exited, lineFrom } from '../support/child';
import {
  createLockApp,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  queueStats,
} from '../support/helpers';
import {
  expectAckedOnce,
  killOneWorkerPerWave,
  spawnQueueWorker,
  waitQueueDrained,
} from '../support/queue-crash';

describe('QueueService crash safety (worker processes killed with SIGKILL mid-task)', () => {
  const prefix = uniquePrefix('queue-crash');
  const queue = 'crash';
  const TASKS = 2_000;
  let app: INestApplicationContext;
  let queues: QueueService;
  let redis: Redis;

  const spawnWorker = () =>
    spawnQueueWorker({
      REDIS_URL: testRedisUrl(),
      PREFIX: prefix,
      QUEUE: queue,
      // Long enough that a worker stalled by a loaded machine keeps its leases (a stall past the
      // lease would make a live worker's tasks run twice, which this test counts as a defect).
      LEASE_MS: '1500',
      CONCURRENCY: '8',
    });
  const counts = async (name: string) => {
    const raw = await redis.hgetall(`${prefix}obs:${name}`);
    return new Map(Object.entries(raw).map(([id, n]) => [id, Number(n)]));
  };

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    // Worker processes a failed test left running are killed after the file (support/after-env).
    await app.close();
    redis.disconnect();
  });

  it('loses no task and acks every task exactly once across 2,000 tasks and 4 kills; only tasks of killed workers run twice', async () => {
    const ids = Array.from({ length: TASKS }, (_, i) => `task-${i}`);
    const alive = new Set(await Promise.all([spawnWorker(), spawnWorker(), spawnWorker()]));
    // Four waves of tasks, one worker SIGKILLed while running tasks in each.
    const inFlightAtKill = await killOneWorkerPerWave({
      queues,
      queue,
      ids,
      waves: 4,
      obs: redis,
      obsPrefix: prefix,
      alive,
      spawnWorker,
    });
    const workers = [...alive];

    await waitQueueDrained(queues, queue);
    // A clean stop (SIGTERM: enableShutdownHooks -> drain) leaves nothing behind either.
    const closed = workers.map((w) => lineFrom(w.child, /^closed$/, 20_000));
    for (const w of workers) w.child.kill('SIGTERM');
    await Promise.all(closed);
    // Nest re-raises the signal after closing the app.
    expect(await Promise.all(workers.map((w) => exited(w.child)))).toEqual(
      workers.map(() => 'SIGTERM'),
    );

    expect(await queues.stats(queue)).toMatchObject(queueStats());
    // No lease left; completed tasks are kept (keepCompleted: 1,000 of them), the rest deleted.
    expect(await redis.exists(`${prefix}queue:{${queue}}:tokens`)).toBe(0);
    expect(await redis.hlen(`${prefix}queue:{${queue}}:payload`)).toBeLessThanOrEqual(1_000);
    // None lost, never acked twice, an ack not seen only for a task a killed worker had in flight.
    await expectAckedOnce(redis, prefix, ids, inFlightAtKill);
    // Handlers ran more than once only for tasks a killed worker had in flight...
    const runs = await counts('runs');
    const rerun = ids.filter((id) => runs.get(id)! > 1);
    expect(rerun.filter((id) => !inFlightAtKill.has(id))).toEqual([]);
    // ...and the killed workers' running tasks were run again by others after their leases expired.
    expect(rerun.length).toBeGreaterThan(0);
  }, 90_000);
});
