import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { Lock, LockReplicationError, LockService, QueueService } from '../../lib';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/**
 * `WAIT` blocks its connection until the replicas acknowledge or its timeout passes. The test
 * server has no replica: a call with `waitForReplicas` waits its whole `timeoutMs`, and the
 * instance's other calls must not wait behind it.
 */
describe('waitForReplicas: WAIT on its own connection', () => {
  const prefix = uniquePrefix('replica-wait-conn');
  // A server of its own: the WAIT in flight is found in its client list.
  let server: RedisServer;
  let redis: Redis;
  let app: INestApplicationContext;
  let locks: LockService;
  let queues: QueueService;

  beforeAll(async () => {
    // commandTimeoutMs below the WAIT's timeout: a call queued behind the WAIT would fail.
    server = await startRedisServer();
    redis = redisClient(server.url);
    app = await createLockApp({ redis: server.url, keyPrefix: prefix, commandTimeoutMs: 300 });
    locks = app.get(LockService);
    queues = app.get(QueueService);
    // Redis knows the extend script: a NOSCRIPT answer would cost a second WAIT.
    const warm = (await locks.tryAcquire('warm-up', { ttlMs: 5_000 }))!;
    await warm.extend();
    await warm.release();
  });
  afterAll(async () => {
    await app?.close();
    redis?.disconnect();
    await server?.stop();
  });

  it('other lock and queue calls of the instance are answered while a WAIT waits', async () => {
    const order: string[] = [];
    const waited = locks
      .acquire('replicated', { waitForReplicas: { replicas: 1, timeoutMs: 1_000 } })
      .finally(() => order.push('waited'));
    waited.catch(() => undefined);
    await waitFor('the WAIT in flight', async () =>
      /\bcmd=wait\b/.test(String(await redis.client('LIST'))),
    );
    const other = await locks.tryAcquire('unrelated', { ttlMs: 5_000 });
    order.push('tryAcquire');
    expect(other).toBeInstanceOf(Lock);
    expect(await queues.enqueue('q', 'task-1', { payload: { n: 1 } })).toBe(1);
    order.push('enqueue');
    await other!.release();
    order.push('release');
    await expect(waited).rejects.toThrow(LockReplicationError);
    await expect(waited).rejects.toThrow(/acknowledged by 0 of 1 required replicas within 1000 ms/);
    expect(order).toEqual(['tryAcquire', 'enqueue', 'release', 'waited']);
    // The lock that could not be confirmed was released again.
    expect(await locks.isLocked('replicated')).toBe(false);
  });
});
