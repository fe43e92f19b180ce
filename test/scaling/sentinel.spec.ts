import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  LockReplicationError,
  LockService,
  QueueService,
  RedisLockError,
  RedisLockOptionsError,
} from '../../lib';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import { createLockApp, redisClient, uniquePrefix, waitFor, waitForLine } from '../support/helpers';
import { startRedisSentinel, type RedisSentinelProcesses } from '../support/redis-sentinel';

describe('Redis Sentinel: 1 master, 1 replica, 3 sentinels (real processes)', () => {
  const prefix = uniquePrefix('sentinel');
  let sentinel: RedisSentinelProcesses;
  let app: INestApplicationContext;
  let locks: LockService;
  let queues: QueueService;
  let replica: Redis;
  // Waiters of another instance: callers of `app` itself would wait in its local cohort, and
  // these tests are about the Redis line and its pub/sub handoff.
  let waiterApp: INestApplicationContext;
  let waiters: LockService;

  beforeAll(async () => {
    sentinel = await startRedisSentinel();
    app = await createLockApp({
      redis: { sentinels: sentinel.sentinels, name: sentinel.name },
      keyPrefix: prefix,
      commandTimeoutMs: 1_000,
    });
    locks = app.get(LockService);
    queues = app.get(QueueService);
    waiterApp = await createLockApp({
      redis: { sentinels: sentinel.sentinels, name: sentinel.name },
      keyPrefix: prefix,
      commandTimeoutMs: 1_000,
    });
    waiters = waiterApp.get(LockService);
    replica = redisClient(`redis://127.0.0.1:${sentinel.servers[1].port}`);
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await waiterApp?.close();
    replica?.disconnect();
    await sentinel?.stop();
  });

  it('locks (with a waiter woken by pub/sub) and the queue work through the master Sentinel names', async () => {
    const held = await locks.acquire('s', { ttlMs: 60_000 });
    // Only the release message can let the waiter in before its wait runs out.
    const waiter = waiters.acquire('s', { waitMs: 8_000 });
    await waitForLine(replica, prefix, 's');
    await held.release();
    const next = await waiter;
    expect(next.fence).toBeGreaterThan(held.fence);
    await next.release();

    const done: string[] = [];
    const worker = queues.process('sq', async (task) => void done.push(task.id));
    try {
      await queues.enqueue('sq', ['a', 'b']);
      await waitFor('both tasks handled', () => done.length === 2);
    } finally {
      await worker.close();
    }
  });

  describe('waitForReplicas', () => {
    it('acquire returns once the replica acknowledged the lock: the replica holds the token, also after a handoff', async () => {
      const w = { replicas: 1, timeoutMs: 2_000 };
      const lock = await locks.acquire('r', { waitForReplicas: w });
      expect(await replica.get(`${prefix}lock:{r}`)).toBe(lock.token);
      // A fair waiter is handed the lock by the release script (a write of the releaser's
      // connection); its confirmation still covers it.
      const waiter = waiters.acquire('r', { waitForReplicas: w, waitMs: 5_000 });
      await waitForLine(replica, prefix, 'r');
      await lock.release();
      const next = await waiter;
      expect(await replica.get(`${prefix}lock:{r}`)).toBe(next.token);
      expect(await next.extend()).toBe(true);
      await next.release();
    });

    it('with the replica frozen, acquire fails with LockReplicationError and releases the lock', async () => {
      const replicaProcess = sentinel.servers[1].process;
      replicaProcess.kill('SIGSTOP');
      try {
        const err = await locks
          .acquire('frozen', { waitForReplicas: { replicas: 1, timeoutMs: 300 } })
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(LockReplicationError);
        expect(err).toMatchObject({ acknowledged: 0, required: 1, operation: 'acquire' });
        expect((err as Error).message).toBe(
          "lock 'frozen': acquire was acknowledged by 0 of 1 required replicas within 300 ms; " +
            'the lock was released again',
        );
        expect(await locks.isLocked('frozen')).toBe(false);
        // Without waitForReplicas nothing waits for the replica.
        const plain = await locks.acquire('plain');
        expect(await plain.extend()).toBe(true);
        expect(await plain.release()).toBe(true);
      } finally {
        replicaProcess.kill('SIGCONT');
      }
      // WAIT blocks until the replica has caught up...
      const again = await locks.acquire('frozen', {
        waitForReplicas: { replicas: 1, timeoutMs: 10_000 },
      });
      await again.release();
      // ...and asking for two replicas of a master that has one gets one acknowledgement.
      const two = await locks
        .acquire('two', { waitForReplicas: { replicas: 2, timeoutMs: 1_000 } })
        .catch((e: unknown) => e);
      expect(two).toBeInstanceOf(LockReplicationError);
      expect(two).toMatchObject({ acknowledged: 1, required: 2 });
      expect(await locks.isLocked('two')).toBe(false);
    });

    it('an extension short of replicas throws LockReplicationError and the lock stays held', async () => {
      const strictApp = await createLockApp({
        redis: { sentinels: sentinel.sentinels, name: sentinel.name },
        keyPrefix: prefix,
        waitForReplicas: { replicas: 1, timeoutMs: 1_000 },
      });
      try {
        const strict = strictApp.get(LockService);
        const lock = await strict.acquire('ext');
        expect(await replica.get(`${prefix}lock:{ext}`)).toBe(lock.token);
        sentinel.servers[1].process.kill('SIGSTOP');
        try {
          const err = await lock.extend(5_000).catch((e: unknown) => e);
          expect(err).toBeInstanceOf(LockReplicationError);
          expect(err).toMatchObject({ operation: 'extend', acknowledged: 0 });
          expect(await lock.isHeld()).toBe(true);
        } finally {
          sentinel.servers[1].process.kill('SIGCONT');
        }
        expect(await lock.release()).toBe(true);
      } finally {
        await strictApp.close();
      }
    });

    it('rejects invalid waitForReplicas naming the option', async () => {
      for (const [value, option] of [
        [{ replicas: 0, timeoutMs: 10 }, 'waitForReplicas.replicas'],
        [{ replicas: 1, timeoutMs: 0 }, 'waitForReplicas.timeoutMs'],
        [{ replicas: 1 }, 'waitForReplicas.timeoutMs'],
        [{ replicas: 1, timeoutMs: 10, wait: 1 }, 'waitForReplicas.wait'],
        [5, 'waitForReplicas'],
      ] as const) {
        const err = await locks
          .acquire('bad', { waitForReplicas: value as never })
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(RedisLockOptionsError);
        expect((err as RedisLockOptionsError).option).toBe(option);
      }
    });
  });

  it('after the master is killed and Sentinel promotes the replica, locks and the queue work again', async () => {
    const errors: Record<string, number> = {};
    const untyped: unknown[] = [];
    let longest = 0;
    let okSince = 0;
    let running = true;
    const loop = async (key: string) => {
      while (running) {
        const start = Date.now();
        try {
          await locks.withLock(key, async () => undefined, { waitMs: 2_000, ttlMs: 3_000 });
          okSince++;
        } catch (err) {
          if (!(err instanceof RedisLockError)) untyped.push(err);
          errors[(err as Error).name] = (errors[(err as Error).name] ?? 0) + 1;
          await new Promise((r) => setTimeout(r, 20));
        }
        longest = Math.max(longest, Date.now() - start);
      }
    };
    const handled = new Set<string>();
    const worker = queues.process('failover-q', async (task) => void handled.add(task.id));
    const loops = ['k1', 'k2', 'k1'].map(loop);
    try {
      await waitFor('the loop under way', () => okSince > 10, 10_000);
      const killedAt = Date.now();
      const promoted = await sentinel.killMaster();
      const promotedAt = Date.now();
      okSince = 0;
      await waitFor('locks again', () => okSince >= 10, 30_000);
      const locksBackAt = Date.now();
      await queues.enqueue('failover-q', ['after-1', 'after-2']);
      await waitFor(
        'tasks enqueued after the promotion handled',
        () => handled.has('after-2'),
        30_000,
      );
      running = false;
      await Promise.all(loops);
      console.log(
        'sentinel failover outcomes: ' +
          JSON.stringify({
            promotedAfterMs: promotedAt - killedAt,
            locksBackAfterKillMs: locksBackAt - killedAt,
            queueBackAfterKillMs: Date.now() - killedAt,
            errors,
            longestOperationMs: longest,
          }),
      );
      // The library's own connection followed Sentinel to the promoted node: the server end of
      // this connection (CLIENT INFO's laddr) is on that node's port, and that node is a master.
      const client = app.get(RedisLockConnection).client as Redis;
      const info = (await client.client('INFO')) as string;
      expect(Number(/\bladdr=[^ ]*:(\d+)/.exec(info)?.[1])).toBe(promoted);
      expect((await client.role())[0]).toBe('master');
      expect(untyped).toEqual([]);
      expect(longest).toBeLessThan(10_000);
    } finally {
      running = false;
      await Promise.all(loops);
      await worker.close();
    }
  }, 90_000);
});
