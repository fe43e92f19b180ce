import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { Redis as RedisClient } from 'ioredis';
import {
  Lock,
  LockReplicationError,
  LockService,
  QueueService,
  RedisLockError,
  RedisLockOptionsError,
} from '../../lib';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import { createLockApp, redisClient, uniquePrefix, waitFor, waitForLine } from '../support/helpers';
import { askNode, NODE_HOST } from '../support/redis-node';
import { startRedisServer } from '../support/redis-server';
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

  it("connects again when a failover announcement cuts its reconnection short (ioredis's failover detector would end the client for good)", async () => {
    const own = await createLockApp({
      redis: { sentinels: sentinel.sentinels, name: sentinel.name },
      keyPrefix: prefix,
      commandTimeoutMs: 1_000,
    });
    try {
      const client = own.get(RedisLockConnection).client as Redis;
      const statuses: string[] = [];
      client.on('end', () => statuses.push('end'));
      // What the detector does on +switch-master while the client is asking the sentinels where
      // the master is: it disconnects the connector, and the attempt fails "Connection is closed."
      const connector = (client as unknown as { connector: { disconnect(): void } }).connector;
      const cut = new Promise<void>((resolve) =>
        client.once('connecting', () => {
          connector.disconnect();
          resolve();
        }),
      );
      client.disconnect(true);
      await cut;
      await waitFor(
        'the ended client to connect again',
        () => statuses.includes('end') && client.status === 'ready',
        10_000,
      );
      const lock = await own.get(LockService).acquire('after-end', { ttlMs: 5_000 });
      await lock.release();
      expect(await own.get(QueueService).enqueue('after-end', 'x')).toBe(1);
    } finally {
      await own.close();
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
        // The default on Sentinel waits for the replica too (500 ms at most)...
        const byDefault = await locks.acquire('default').catch((e: unknown) => e);
        expect(byDefault).toBeInstanceOf(LockReplicationError);
        expect(byDefault).toMatchObject({ acknowledged: 0, required: 1, timeoutMs: 500 });
        expect(await locks.isLocked('default')).toBe(false);
        // ...and with waitForReplicas: false nothing waits for it.
        const plain = await locks.acquire('plain', { waitForReplicas: false });
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

    it('by default a lock waits for the replica (the master has one): the replica holds its token when acquire returns', async () => {
      for (let i = 0; i < 20; i++) {
        const lock = await locks.acquire(`default-${i}`);
        expect(await replica.get(`${prefix}lock:{default-${i}}`)).toBe(lock.token);
        expect(await lock.release()).toBe(true);
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

  it('after the master is killed and Sentinel promotes the replica, locks and the queue work again; a held lock keeps being extended', async () => {
    const errors: Record<string, number> = {};
    const untyped: unknown[] = [];
    const recent: string[] = [];
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
          recent.push(`${Date.now() % 100_000} ${key} ${(err as Error).message}`);
          if (recent.length > 12) recent.shift();
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
      // Granted with the default wait while the master has a replica: the promoted one holds it.
      const across = await locks.acquire('across', { ttlMs: 60_000 });
      const killedAt = Date.now();
      const promoted = await sentinel.killMaster();
      const promotedAt = Date.now();
      okSince = 0;
      await waitFor('locks again', () => okSince >= 10, 30_000).catch((err: Error) => {
        // What the loops last saw says why they did not resume.
        throw new Error(
          `${err.message}; errors ${JSON.stringify(errors)}; last: ${recent.join(' | ')}`,
        );
      });
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

      // The default wait follows the current master, also for locks already held: the one held
      // across the failover is extended on the promoted master (no replica yet) without waiting
      // for one (it used to fail every extension with LockReplicationError until its TTL ran
      // out)...
      const before = across.expiresAt;
      expect(await across.extend()).toBe(true);
      expect(across.expiresAt).toBeGreaterThan(before);
      expect(await client.get(`${prefix}lock:{across}`)).toBe(across.token);
      // ...and a lock granted while it has none waits for the replica that joins it later.
      const window = await locks.acquire('window', { ttlMs: 60_000 });
      const joined = await startRedisServer(['--replicaof', NODE_HOST, String(promoted)]);
      try {
        const watch = app.get(RedisLockConnection).replicaWatch!;
        await waitFor(
          'the joined replica counted',
          async () => (await watch.replicas()) === 1,
          15_000,
          50,
        );
        joined.process.kill('SIGSTOP');
        try {
          for (const lock of [window, across]) {
            const err = await lock.extend().catch((e: unknown) => e);
            expect(err).toBeInstanceOf(LockReplicationError);
            expect(err).toMatchObject({ operation: 'extend', acknowledged: 0, required: 1 });
          }
        } finally {
          joined.process.kill('SIGCONT');
        }
        expect(await window.release()).toBe(true);
        expect(await across.release()).toBe(true);
      } finally {
        await joined.stop();
      }
    } finally {
      running = false;
      await Promise.all(loops);
      await worker.close();
    }
  }, 120_000);
});

describe('Sentinel split brain: the master is cut off from its replica and the sentinels, clients still reach it', () => {
  const prefix = uniquePrefix('sentinel-split');
  let sentinel: RedisSentinelProcesses;
  const apps: INestApplicationContext[] = [];
  const admins: RedisClient[] = [];
  // The apps log in as 'app'; the sentinels and the replication link use the default user, which
  // the test switches off on the master to cut it off from them (no network namespace needed).
  const app = async (redis: object = {}, options: object = {}) => {
    const created = await createLockApp({
      redis: {
        sentinels: sentinel.sentinels,
        name: sentinel.name,
        username: 'app',
        password: 'app-secret',
        ...redis,
      },
      keyPrefix: prefix,
      commandTimeoutMs: 2_000,
      ...options,
    });
    apps.push(created);
    return created.get(LockService);
  };
  const admin = (port: number) => {
    const client = new RedisClient({
      host: NODE_HOST,
      port,
      username: 'app',
      password: 'app-secret',
      maxRetriesPerRequest: 1,
    });
    admins.push(client);
    return client;
  };

  beforeAll(async () => {
    sentinel = await startRedisSentinel();
    for (const server of sentinel.servers) {
      await askNode(server.port, 'ACL', 'SETUSER', 'app', 'on', '>app-secret', '~*', '&*', '+@all');
    }
  }, 60_000);
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    for (const c of admins) c.disconnect();
    await sentinel?.stop();
  });

  it('with the defaults no lock is granted twice: the deposed master answers LockReplicationError, the promoted one grants', async () => {
    const oldPort = await sentinel.currentMaster();
    const newPort = sentinel.servers.find((s) => s.port !== oldPort)!.port;
    // Pinned to the old master (no +switch-master reconnect): what a client cut off from every
    // sentinel would see.
    const pinned = await app({ failoverDetector: false });
    const optedOut = await app({ failoverDetector: false }, { waitForReplicas: false });
    // The default: follows the sentinels' +switch-master to the promoted replica.
    const following = await app();
    for (const locks of [pinned, optedOut, following]) {
      const lock = await locks.acquire('stock');
      expect(await lock.release()).toBe(true);
    }

    const oldMaster = admin(oldPort);
    await oldMaster.call('ACL', 'SETUSER', 'default', 'off');
    await oldMaster.call('CLIENT', 'KILL', 'USER', 'default');
    await waitFor(
      `the sentinels to promote the replica on port ${newPort}`,
      async () => (await sentinel.currentMaster().catch(() => 0)) === newPort,
      30_000,
      50,
    );
    const newMaster = admin(newPort);
    await waitFor(
      'the promoted replica to answer as a master',
      async () => ((await newMaster.role()) as string[])[0] === 'master',
      10_000,
      50,
    );

    // A process that connects now is sent to the promoted replica, which has no replica of its
    // own yet: it grants without waiting.
    const fresh = await app();
    const held = await fresh.acquire('stock', { ttlMs: 30_000 });
    expect(await newMaster.get(`${prefix}lock:{stock}`)).toBe(held.token);

    // The deposed master still answers its clients, and its lock key is free: with the defaults
    // it refuses every grant (no replica acknowledges), releases the key and says why.
    let grantedTwice = 0;
    const refusals: unknown[] = [];
    for (let i = 0; i < 10; i++) {
      const outcome = await pinned.acquire('stock').catch((e: unknown) => e);
      if (outcome instanceof Lock) {
        grantedTwice++;
        await outcome.release();
      } else refusals.push(outcome);
    }
    expect(grantedTwice).toBe(0);
    expect(refusals).toHaveLength(10);
    for (const err of refusals) {
      expect(err).toBeInstanceOf(LockReplicationError);
      expect(err).toMatchObject({ operation: 'acquire', acknowledged: 0, required: 1 });
    }
    expect(await oldMaster.exists(`${prefix}lock:{stock}`)).toBe(0);

    // The client that follows the sentinels moved to the promoted master: its acquisition waits
    // in line behind `held` instead of being granted a second time.
    await waitFor(
      'the following client on the promoted master',
      async () => (await following.isLocked('stock').catch(() => false)) === true,
      10_000,
      50,
    );
    expect(await following.tryAcquire('stock')).toBeNull();

    // Opting out takes the documented risk: the deposed master grants the lock a second time.
    const twice = await optedOut.acquire('stock');
    expect(twice.token).not.toBe(held.token);
    expect(await held.isHeld()).toBe(true);
    expect(await twice.isHeld()).toBe(true);
    await twice.release();
    await held.release();
  }, 90_000);
});
