import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { LockService } from '../../lib';
import { createLockApp, redisClient, uniquePrefix } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/**
 * What `Lock.fence` promises in quorum mode (`nodes`), as its TSDoc and docs/scaling.md ("Fenced
 * quorum locks") say: a real fence, never 0 with fencing on; one above the highest of the
 * granting nodes' own fences and accepted by a majority of the nodes' counters of the lock before
 * the grant is reported; strictly rising from one grant of the lock to the next, by any instance,
 * also when a node's counter is ahead (its refusal raises the fence) or gone (a node restarted
 * empty, an expired counter: it counts as the node's TIME in µs); `0` with `fencing: false`.
 */
describe('quorum mode (nodes): lock.fence is a real fence', () => {
  const prefix = uniquePrefix('quorum-fence');
  let servers: RedisServer[];
  let clients: Redis[];
  let apps: INestApplicationContext[];
  let instances: LockService[];
  const counterKey = (name: string) => `${prefix}lock:{${name}}:fence`;
  const counters = (name: string) =>
    Promise.all(clients.map((c) => c.get(counterKey(name)).then((v) => (v === null ? 0 : +v))));

  beforeAll(async () => {
    servers = await Promise.all([startRedisServer(), startRedisServer(), startRedisServer()]);
    clients = servers.map((s) => redisClient(s.url));
    const options = {
      keyPrefix: prefix,
      nodes: servers.map((s) => s.url),
      commandTimeoutMs: 2_000,
    };
    apps = [await createLockApp(options), await createLockApp(options)];
    instances = apps.map((app) => app.get(LockService));
  }, 30_000);
  afterAll(async () => {
    for (const app of apps ?? []) await app.close();
    for (const c of clients ?? []) c.disconnect();
    await Promise.all((servers ?? []).map((s) => s.stop()));
  });

  it('rises strictly over grants by two instances, is accepted by a majority before the grant, and survives a counter that is ahead or gone', async () => {
    const fences: number[] = [];
    const grant = async (i: number) => {
      const lock = await instances[i % 2].acquire('res', { ttlMs: 5_000, waitMs: 2_000 });
      try {
        expect(lock.fence).toBeGreaterThan(0);
        expect(Number.isSafeInteger(lock.fence)).toBe(true);
        // Accepted into a majority of the nodes' counters of the lock before it was reported.
        const accepted = (await counters('res')).filter((c) => c === lock.fence).length;
        expect(accepted).toBeGreaterThanOrEqual(2);
        fences.push(lock.fence);
      } finally {
        await lock.release();
      }
    };
    for (let i = 0; i < 20; i++) await grant(i);

    // Every counter gone (nodes restarted empty, or fenceTtlMs passed): a missing counter counts as
    // the node's TIME in µs, so the fences do not start again low. (This rests on the nodes'
    // clocks, which here are one machine's: not behind the one that handed out the last fence.)
    await Promise.all(clients.map((c) => c.del(counterKey('res'))));
    for (let i = 20; i < 30; i++) await grant(i);

    // Node 3's counter an hour ahead (as if its clock were): a grant that counts node 3's own
    // fence gets a fence above it, one decided by nodes 1 and 2 first stays below it (node 3
    // refuses that write-back, a majority accepts); either way the next grant is above the last,
    // as any two majorities share a node.
    const ahead = Math.max(...(await counters('res'))) + 3_600_000_000;
    await clients[2].set(counterKey('res'), String(ahead), 'PX', 3_600_000);
    for (let i = 30; i < 40; i++) await grant(i);

    const notRising = fences.flatMap((f, i) => (i > 0 && f <= fences[i - 1] ? [i] : []));
    expect(notRising).toEqual([]);
    expect(new Set(fences).size).toBe(fences.length);
  });

  it('a multi-key lock gets one fence per key, each above that key’s last; fencing: false gives 0 and touches no counter', async () => {
    const first = await instances[0].acquire('mk-a');
    await first.release();
    const both = await instances[1].acquire(['mk-a', 'mk-b']);
    try {
      expect(both.fences).toHaveLength(2);
      expect(both.fences[0]).toBeGreaterThan(first.fence);
      expect(both.fences[1]).toBeGreaterThan(0);
    } finally {
      await both.release();
    }
    const plain = await instances[0].acquire('unfenced', { fencing: false });
    try {
      expect(plain.fence).toBe(0);
      expect(await counters('unfenced')).toEqual([0, 0, 0]);
    } finally {
      await plain.release();
    }
  });
});
