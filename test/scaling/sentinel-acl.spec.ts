import 'reflect-metadata';
import { Logger, type INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  LockReplicationError,
  LockService,
  QueueReplicationError,
  QueueService,
  type RedisLockModuleOptions,
} from '../../lib';
import { connectedReplicas } from '../../lib/redis/replica-watch';
import { commandCalls, createLockApp, waitFor } from '../support/helpers';
import { documentedAcl } from '../support/documented-acl';
import { NODE_HOST } from '../support/redis-node';
import { startRedisSentinel, type RedisSentinelProcesses } from '../support/redis-sentinel';

describe('Sentinel under an ACL user that may not run INFO (replicas cannot be counted)', () => {
  const prefix = 'sacl:';
  let sentinel: RedisSentinelProcesses;
  let master: Redis;
  let app: INestApplicationContext;
  let locks: LockService;
  const warn = jest.spyOn(Logger.prototype, 'warn');
  /** Connection options of the restricted user, through the sentinels. */
  const asApp = () => ({
    sentinels: sentinel.sentinels,
    name: sentinel.name,
    username: 'app',
    password: 'pw',
  });

  beforeAll(async () => {
    sentinel = await startRedisSentinel();
    master = new Redis(sentinel.servers[0].port, NODE_HOST);
    // The documented line without INFO (common on managed services), on the master and the
    // replica (ACL users are not replicated).
    const acl = [...documentedAcl('base', 'pw', prefix), '-info'];
    for (const server of sentinel.servers) {
      const node = new Redis(server.port, NODE_HOST);
      await node.call('ACL', 'SETUSER', 'app', ...acl);
      node.disconnect();
    }
    expect(connectedReplicas(await master.info('replication'))).toBe(1);
    const options: RedisLockModuleOptions = {
      redis: asApp(),
      keyPrefix: prefix,
      commandTimeoutMs: 2_000,
    };
    app = await createLockApp(options);
    locks = app.get(LockService);
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    master?.disconnect();
    await sentinel?.stop();
    warn.mockRestore();
  });

  const waits = async () => (await commandCalls(master)).get('wait') ?? 0;

  it('acquisitions still WAIT for a replica, as if one was counted: one WAIT per acquisition', async () => {
    // Without INFO the old code sent no WAIT at all (0 for 5 acquisitions).
    for (let i = 0; i < 5; i++) {
      const before = await waits();
      const lock = await locks.acquire(`w${i}`);
      // The replica acknowledged the grant before acquire returned (the first call sends its
      // pipeline twice: EVALSHA answers NOSCRIPT, then EVAL, each followed by WAIT).
      expect(await waits()).toBeGreaterThanOrEqual(before + 1);
      expect(await lock.release()).toBe(true);
    }
    // Why it waits without a count is logged, once, however many counts failed.
    const failures = warn.mock.calls
      .map((call) => String(call[0]))
      .filter((w) => /counting the replicas of the Sentinel master failed/.test(w));
    expect(failures).toEqual([expect.stringMatching(/locks wait for 1 replica.*NOPERM/)]);
  });

  it('with the replica frozen, acquisitions fail with LockReplicationError: never granted unreplicated', async () => {
    const replica = sentinel.servers[1].process;
    replica.kill('SIGSTOP');
    try {
      for (let i = 0; i < 3; i++) {
        const err = await locks.acquire(`f${i}`).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(LockReplicationError);
        expect(err).toMatchObject({ acknowledged: 0, required: 1, operation: 'acquire' });
        expect(await locks.isLocked(`f${i}`)).toBe(false);
      }
    } finally {
      replica.kill('SIGCONT');
    }
    await waitFor(
      'the replica to be back',
      async () => connectedReplicas(await master.info('replication')) === 1,
      20_000,
      100,
    );
  });

  it('with waitForReplicas: false (opted out) the replicas are neither counted nor waited for', async () => {
    const optedOut = await createLockApp({
      redis: asApp(),
      keyPrefix: prefix,
      waitForReplicas: false,
    });
    try {
      await master.config('RESETSTAT');
      const lock = await optedOut.get(LockService).acquire('out');
      await lock.release();
      expect(await waits()).toBe(0);
    } finally {
      await optedOut.close();
    }
  });

  it("the queue's explicit waitForReplicas on a plain connection to the master: sent, and WAIT decides (INFO refused was a NOPERM failure of every enqueue)", async () => {
    const direct = await createLockApp({
      redis: `redis://app:pw@${NODE_HOST}:${sentinel.servers[0].port}`,
      keyPrefix: prefix,
      queue: { waitForReplicas: { replicas: 1, timeoutMs: 2_000 } },
    });
    try {
      const queues = direct.get(QueueService);
      await master.config('RESETSTAT');
      expect(await queues.enqueue('replicated', ['a', 'b'])).toBe(2);
      expect(await waits()).toBeGreaterThanOrEqual(1);
      // Asking for more replicas than there are: the write was sent, too few acknowledged.
      const err = await queues
        .enqueue('replicated', 'c', { waitForReplicas: { replicas: 2, timeoutMs: 200 } })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(QueueReplicationError);
      expect(err).toMatchObject({ acknowledged: 1, required: 2, sent: true });
    } finally {
      await direct.close();
    }
  });
});
