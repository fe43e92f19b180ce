import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { LockService, type Lock } from '../../lib';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import {
  commandCalls,
  createLockApp,
  deferred,
  redisClient,
  uniquePrefix,
  waitFor,
} from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

describe('Redlock quorum mode: a node restarted empty is locked again by the next extension', () => {
  const prefix = uniquePrefix('redlock-repair');
  let servers: RedisServer[];
  let clients: Redis[];
  let app: INestApplicationContext;
  let other: INestApplicationContext;
  let locks: LockService;
  let rival: LockService;
  const valueKey = (name: string) => `${prefix}lock:{${name}}`;
  /** The lock's value on each node (null where free or unreachable). */
  const values = (name: string) =>
    Promise.all(clients.map((c) => c.get(valueKey(name)).catch(() => null)));

  beforeAll(async () => {
    servers = await Promise.all([startRedisServer(), startRedisServer(), startRedisServer()]);
    clients = servers.map((s) => redisClient(s.url));
    for (const c of clients) c.on('error', () => undefined);
    const options = {
      keyPrefix: prefix,
      nodes: servers.map((s) => s.url),
      commandTimeoutMs: 1_000,
    };
    app = await createLockApp(options);
    other = await createLockApp(options);
    locks = app.get(LockService);
    rival = other.get(LockService);
  }, 30_000);
  afterAll(async () => {
    await app?.close();
    await other?.close();
    for (const c of clients ?? []) c.disconnect();
    await Promise.all((servers ?? []).map((s) => s.stop()));
  });

  it('rolling restart of node 1, then node 2 stopped: nodes 1 and 3 still hold the lock for its holder', async () => {
    const finish = deferred();
    let lock!: Lock;
    const entered = deferred();
    // ttlMs 1500: extended about every 500 ms while the callback runs.
    const section = locks.withLock(
      'r',
      async (l) => {
        lock = l;
        entered.resolve();
        await finish.promise;
      },
      { ttlMs: 1_500 },
    );
    await entered.promise;
    await waitFor('the lock on all three nodes', async () =>
      (await values('r')).every((v) => v === lock.token),
    );

    // Node 1 restarts without its data (no persistence, like a replaced container).
    const runId = () => clients[0].info('server').then((i) => /run_id:(\w+)/.exec(i)![1]);
    const before = await runId();
    await servers[0].stop();
    await servers[0].restart();
    expect(await runId()).not.toBe(before);
    // An extension reached the new process: the first script there is an EVAL (empty cache).
    await waitFor('an extension run on the restarted node 1', async () => {
      const calls = await commandCalls(clients[0]);
      return (calls.get('eval') ?? 0) >= 1;
    });
    const extendedAt = lock.expiresAt;
    await waitFor('the next extension', () => lock.expiresAt > extendedAt || lock.signal.aborted);

    // Node 2 goes away: nodes 1 and 3 are a majority, so the lock stays held and extended.
    await servers[1].stop();
    const beforeStop = lock.expiresAt;
    await waitFor(
      'an extension with node 2 down',
      () => lock.expiresAt > beforeStop || lock.signal.aborted,
    );
    const taken = await rival.tryAcquire('r');
    const [v1, , v3] = await values('r');
    expect({
      aborted: lock.signal.aborted,
      held: await lock.isHeld(),
      takenByAnother: taken !== null,
      nodes1and3: [v1, v3],
    }).toEqual({
      aborted: false,
      held: true,
      takenByAnother: false,
      nodes1and3: [lock.token, lock.token],
    });

    finish.resolve();
    await section;
    await waitFor('released on nodes 1 and 3', async () => {
      const [v1, , v3] = await values('r');
      return v1 === null && v3 === null;
    });
    await servers[1].restart();
    await waitFor('both modules connected to every node again', () =>
      [app, other].every((a) => a.get(RedisLockConnection).nodes.every((n) => !n.disconnected)),
    );
  }, 60_000);

  it('extend locks again a node that lost the key, leaves a foreign holder alone, and counts both right', async () => {
    const lock = await locks.acquire('e', { ttlMs: 10_000 });
    await waitFor('the lock on all three nodes', async () =>
      (await values('e')).every((v) => v === lock.token),
    );
    await clients[0].del(valueKey('e'));
    await clients[1].set(valueKey('e'), 'someone', 'PX', 10_000);
    // Node 1 is locked again and confirms; node 2 belongs to someone else and does not.
    expect(await lock.extend(20_000)).toBe(true);
    expect(await values('e')).toEqual([lock.token, 'someone', lock.token]);
    expect(await clients[0].pttl(valueKey('e'))).toBeGreaterThan(15_000);
    await clients[1].del(valueKey('e'));
    expect(await lock.release()).toBe(true);
  });

  it('does not revive a lock that lapsed: extend after the TTL is false and locks nothing', async () => {
    const lock = await locks.acquire('lapsed', { ttlMs: 300 });
    await waitFor('the lock expired on every node', async () =>
      (await values('lapsed')).every((v) => v === null),
    );
    expect(await lock.extend(10_000)).toBe(false);
    expect(await values('lapsed')).toEqual([null, null, null]);
  });
});
