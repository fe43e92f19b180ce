import 'reflect-metadata';
import { Logger, type INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { QueueService } from '../../lib';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';

describe('QueueService worker failure log', () => {
  const prefix = uniquePrefix('queue-worker-log');
  let app: INestApplicationContext;
  let queues: QueueService;
  let redis: Redis;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    jest.restoreAllMocks();
    await app.close();
    redis.disconnect();
  });

  it('names the operation that failed: an ack is "Redis queue ack failed", not a claim', async () => {
    const warnings: string[] = [];
    jest.spyOn(Logger.prototype, 'warn').mockImplementation((message: unknown) => {
      warnings.push(String(message));
    });
    const q = 'ack-fails';
    const { results } = queueRedisKeys(prefix, q);
    // The handler breaks the key the ack writes (a hash made a string): the ack's script fails.
    const worker = queues.process(q, async () => void (await redis.set(results, 'not a hash')));
    await queues.enqueue(q, 'a', { payload: { n: 1 } });
    await waitFor('the ack to fail', () => warnings.some((w) => w.includes('worker ack failed')));
    await worker.close();
    const line = warnings.find((w) => w.includes('worker ack failed'))!;
    expect(line).toContain(`queue '${q}': worker ack failed: Redis queue ack failed: `);
    expect(line).not.toContain('queue claim');
  });
});
