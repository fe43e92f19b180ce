import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  FencedStore,
  LockQuorumError,
  LockService,
  LockTimeoutError,
  QueueService,
  RedisLockOptionsError,
  SemaphoreService,
  type Lock,
} from '../../lib';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import { killSpawnedChildren } from '../support/child';
import { expectExactCounter } from '../support/exact-counter';
import {
  commandCalls,
  createLockApp,
  deferred,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';
import { LatencyProxy } from '../faults/support/latency-proxy';

describe('Redlock quorum mode (nodes): 3 independent redis-server masters', () => {
  const prefix = uniquePrefix('redlock');
  let servers: RedisServer[];
  let clients: Redis[];
  let app: INestApplicationContext;
  let other: INestApplicationContext;
  let locks: LockService;
  let rival: LockService;
  /** Proxies in front of nodes 2 and 3 (index 1 and 2; index 0 unused): `hold()` partitions them. */
  let proxies: LatencyProxy[];
  /** An app that reaches node 1 directly and nodes 2 and 3 through `proxies`. */
  let cutApp: INestApplicationContext;
  let cut: LockService;
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
    proxies = servers.map((s) => new LatencyProxy(s.port, 0));
    await Promise.all(proxies.map((p) => p.start()));
    // A shorter command bound: an attempt split between nodes 1 and 2 waits for node 3's.
    cutApp = await createLockApp({
      ...options,
      nodes: [servers[0].url, proxies[1].url, proxies[2].url],
      commandTimeoutMs: 300,
    });
    cut = cutApp.get(LockService);
  }, 30_000);
  afterAll(async () => {
    // Children of a failed test: stopped before the nodes they use.
    await killSpawnedChildren();
    for (const p of proxies ?? []) p.resume();
    await app?.close();
    await other?.close();
    await cutApp?.close();
    await Promise.all((proxies ?? []).map((p) => p.close()));
    for (const c of clients ?? []) c.disconnect();
    await Promise.all((servers ?? []).map((s) => s.stop()));
  });

  it('takes the lock on every node with one token, expiring by ttl - drift, and releases it on all', async () => {
    const before = Date.now();
    const lock = await locks.acquire('a', { ttlMs: 10_000 });
    // Granted once two nodes said yes; the third answers a moment later.
    expect((await values('a')).filter((v) => v === lock.token).length).toBeGreaterThanOrEqual(2);
    await waitFor('the third node', async () => (await values('a')).every((v) => v === lock.token));
    // drift = 0.01 * 10000 + 2 ms
    expect(lock.expiresAt).toBeGreaterThanOrEqual(before + 10_000 - 102);
    expect(lock.expiresAt).toBeLessThanOrEqual(Date.now() + 10_000 - 102);
    expect(await lock.isHeld()).toBe(true);
    expect(await rival.isLocked('a')).toBe(true);
    expect(await lock.extend(20_000)).toBe(true);
    // Extended once two nodes confirmed; the third may answer a moment later.
    await waitFor(
      'the extension on the third node',
      async () => (await clients[2].pttl(valueKey('a'))) > 15_000,
    );
    expect(await lock.release()).toBe(true);
    // Released once two nodes confirmed; the third follows.
    await waitFor('released on every node', async () =>
      (await values('a')).every((v) => v === null),
    );
    expect(await rival.isLocked('a')).toBe(false);
  });

  it('fencing (the default): the fence is written back to a majority of the fence counters before the grant; fencing: false gives fence 0 and touches no counter', async () => {
    const lock = await locks.acquire('f');
    expect(lock.fence).toBeGreaterThan(0);
    const counters = () =>
      Promise.all(clients.map((c) => c.get(`${valueKey('f')}:fence`).then(Number)));
    // Each node handed out its own next fence; the grant's is one above the highest, and at
    // least two nodes' counters were raised to it.
    expect((await counters()).filter((c) => c === lock.fence).length).toBeGreaterThanOrEqual(2);
    expect(await lock.release()).toBe(true);
    const next = await rival.acquire('f');
    expect(next.fence).toBeGreaterThan(lock.fence);
    await next.release();
    // A multi-key lock gets one fence per key, each above that key's last.
    const both = await locks.acquire(['{f}', '{f}:other']);
    expect(both.fences[0]).toBeGreaterThan(next.fence);
    expect(both.fences[1]).toBeGreaterThan(0);
    await both.release();

    const plain = await locks.acquire('plain', { fencing: false });
    expect(plain.fence).toBe(0);
    expect(await Promise.all(clients.map((c) => c.exists(`${valueKey('plain')}:fence`)))).toEqual([
      0, 0, 0,
    ]);
    await plain.release();
  });

  it('a majority decides: a foreign value on one node does not block, on two it does (LockTimeoutError)', async () => {
    await clients[0].set(valueKey('m'), 'someone', 'PX', 10_000);
    const lock = await locks.acquire('m');
    expect(await values('m')).toEqual(['someone', lock.token, lock.token]);
    expect(await lock.isHeld()).toBe(true);
    expect(await lock.release()).toBe(true);

    await clients[1].set(valueKey('m'), 'someone', 'PX', 10_000);
    const err = await locks.acquire('m', { waitMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockTimeoutError);
    // The failed attempts were undone on the node that granted them.
    await waitFor('the grants undone', async () => (await values('m'))[2] === null);
    // The waiting attempts marked the foreign holders (so that their release would announce
    // itself) and left no grant behind.
    expect(await values('m')).toEqual(['someone*', 'someone*', null]);
    await clients[0].del(valueKey('m'));
    await clients[1].del(valueKey('m'));
  });

  it('rejects a TTL that can never outlast the clock drift, naming ttlMs', async () => {
    const err = await locks.acquire('tiny', { ttlMs: 2 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RedisLockOptionsError);
    expect((err as RedisLockOptionsError).option).toBe('ttlMs');
    expect(await values('tiny')).toEqual([null, null, null]);
  });

  it('a waiter is woken by the release message of the nodes, not by polling', async () => {
    const held = await rival.acquire('w', { ttlMs: 60_000 });
    // Poll interval and holder TTL far beyond the wait: only a message can let the waiter in.
    const waiter = locks.acquire('w', { waitMs: 8_000, retryIntervalMs: 60_000 });
    await waitFor('the waiter subscribed on every node', async () => {
      for (const c of clients) {
        const [, n] = (await c.pubsub('NUMSUB', `${valueKey('w')}:released`)) as [string, number];
        if (n < 1) return false;
      }
      return true;
    });
    await held.release();
    const lock: Lock = await waiter;
    // Granted by a majority; a node whose release arrived after the waiter's try there may not
    // be one of them (a loaded machine: CI saw the rival's marked value on one node once). The
    // rival's value leaves every node all the same.
    const granted = (await values('w')).filter((v) => v === lock.token || v === `${lock.token}*`);
    expect(granted.length).toBeGreaterThanOrEqual(2);
    await waitFor('the rival released on every node', async () =>
      (await values('w')).every((v) => v === null || !v.startsWith(held.token)),
    );
    await lock.release();
  });

  it('one node stopped: locks are still granted and released by the other two; two stopped: LockQuorumError within the wait; restarted: back to normal', async () => {
    await servers[2].stop();
    const lock = await locks.acquire('n', { waitMs: 2_000 });
    expect((await values('n')).slice(0, 2)).toEqual([lock.token, lock.token]);
    expect(await rival.tryAcquire('n')).toBeNull();
    expect(await lock.extend()).toBe(true);
    expect(await lock.isHeld()).toBe(true);
    expect(await lock.release()).toBe(true);

    await servers[1].stop();
    const started = Date.now();
    const err = await locks.acquire('n', { waitMs: 1_000 }).catch((e: unknown) => e);
    const waited = Date.now() - started;
    expect(err).toBeInstanceOf(LockQuorumError);
    expect(err).toMatchObject({
      nodes: 3,
      answered: 1,
      granted: 1,
      needed: 2,
      operation: 'acquire',
    });
    expect((err as Error).message).toMatch(
      /^lock 'n': acquire failed within \d+ ms: only 1 of 3 Redis nodes answered \(1 granted\); a quorum needs 2$/,
    );
    // waitMs plus at most one bounded attempt (commandTimeoutMs) and scheduling slack.
    expect(waited).toBeLessThan(1_000 + 1_000 + 1_500);
    console.log(
      `redlock: LockQuorumError with 2 of 3 nodes stopped after ${waited} ms (waitMs 1000)`,
    );
    // The attempts were undone on the node that granted them.
    expect(await clients[0].get(valueKey('n'))).toBeNull();
    await expect(locks.tryAcquire('n')).rejects.toBeInstanceOf(LockQuorumError);
    await expect(locks.isLocked('n')).rejects.toBeInstanceOf(LockQuorumError);

    // On a loaded machine an undo can time out and leave a grant on a node until its TTL: the
    // wait below covers one default TTL (30 s).
    await Promise.all([servers[1].restart(), servers[2].restart()]);
    const restartedAt = Date.now();
    let back: Lock | undefined;
    await waitFor(
      'a lock granted on all three nodes again',
      async () => {
        const lock = await locks.acquire('n').catch(() => undefined);
        if (!lock) return false;
        const held = await values('n');
        if (held.every((v) => v === lock.token)) back = lock;
        else await lock.release().catch(() => undefined);
        return back !== undefined;
      },
      40_000,
      100,
    );
    console.log(`redlock: all 3 nodes granting again ${Date.now() - restartedAt} ms after restart`);
    expect(await back!.release()).toBe(true);
    await waitFor('released on every node', async () =>
      (await values('n')).every((v) => v === null),
    );
  }, 90_000);

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

    let stopped = false;
    try {
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
      stopped = true;
      const beforeStop = lock.expiresAt;
      await waitFor(
        'an extension with node 2 down',
        () => lock.expiresAt > beforeStop || lock.signal.aborted,
      );
      const taken = await rival.tryAcquire('r');
      await taken?.release();
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
    } finally {
      finish.resolve();
      await section.catch(() => undefined);
      // The next tests need all three nodes.
      if (stopped) await servers[1].restart();
      await waitFor('both modules connected to every node again', () =>
        [app, other].every((a) => a.get(RedisLockConnection).nodes.every((n) => !n.disconnected)),
      );
    }
    await waitFor('released on every node', async () =>
      (await values('r')).every((v) => v === null),
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

  it('a lost lock never comes back: an extension held in a partition that runs after the lock lapsed, and after another holder took and released it, locks nothing', async () => {
    const rounds = Number(process.env.QUORUM_PARTITION_ROUNDS ?? 3);
    const nodes = cutApp.get(RedisLockConnection).nodes;
    const outcome = { revivedKeys: 0, heldAfterHeal: 0, releasedAfterHeal: 0, takenMeanwhile: 0 };
    for (let round = 0; round < rounds; round++) {
      const name = `ghost:${round}`;
      const lock = await cut.acquire(name, { ttlMs: 1_000 });
      await waitFor('the lock on all three nodes', async () =>
        (await values(name)).every((v) => v === lock.token),
      );
      // Partition: the holder's traffic to nodes 2 and 3 waits in the proxies. The extension is
      // sent while the lock is valid; node 1 extends it, nodes 2 and 3 only get it after the heal.
      proxies[1].hold();
      proxies[2].hold();
      const extension = lock.extend(1_000).catch((e: unknown) => e);
      await waitFor(
        'the lock lapsed on nodes 2 and 3',
        async () => {
          const [, v2, v3] = await values(name);
          return v2 === null && v3 === null;
        },
        5_000,
      );
      const extended = await extension;
      expect(extended === false || extended instanceof LockQuorumError).toBe(true);
      // Meanwhile another instance takes the lock on nodes 2 and 3 and releases it.
      const taken = await rival.acquire(name, { waitMs: 5_000, fencing: false });
      outcome.takenMeanwhile++;
      expect(await taken.release()).toBe(true);
      // Heal: the held extension runs on nodes 2 and 3 now; a PING behind it on the same
      // connections answers once it ran.
      proxies[1].resume();
      proxies[2].resume();
      await Promise.all([1, 2].map((i) => nodes[i].call('PING', (c) => c.ping())));
      const [, v2, v3] = await values(name);
      outcome.revivedKeys += [v2, v3].filter((v) => v === lock.token).length;
      if (await lock.isHeld()) outcome.heldAfterHeal++;
      if (await lock.release()) outcome.releasedAfterHeal++;
    }
    console.log(
      `redlock: extension held in a partition, ${rounds} rounds: ${JSON.stringify(outcome)}`,
    );
    expect(outcome).toEqual({
      revivedKeys: 0,
      heldAfterHeal: 0,
      releasedAfterHeal: 0,
      takenMeanwhile: rounds,
    });
  }, 60_000);

  it('a relock before the lock lapsed still repairs a node: a holder whose traffic to a node was held for less than the validity is locked there again by the held extension', async () => {
    const nodes = cutApp.get(RedisLockConnection).nodes;
    const lock = await cut.acquire('repair', { ttlMs: 10_000 });
    await waitFor('the lock on all three nodes', async () =>
      (await values('repair')).every((v) => v === lock.token),
    );
    proxies[2].hold();
    // Node 3 loses the key (as if restarted empty) while its traffic is held; the extension,
    // held too, reaches it well within the lock's validity and sets it again.
    await clients[2].del(valueKey('repair'));
    expect(await lock.extend(10_000)).toBe(true);
    proxies[2].resume();
    await nodes[2].call('PING', (c) => c.ping());
    expect(await values('repair')).toEqual([lock.token, lock.token, lock.token]);
    expect(await lock.release()).toBe(true);
  });

  it('a holder that a waiter marked still extends and is held', async () => {
    const lock = await locks.acquire('marked', { ttlMs: 10_000 });
    const waiter = rival.acquire('marked', { waitMs: 5_000, retryIntervalMs: 60_000 });
    await waitFor('the holder marked on every node', async () =>
      (await values('marked')).every((v) => v === `${lock.token}*`),
    );
    expect(await lock.isHeld()).toBe(true);
    expect(await lock.extend(10_000)).toBe(true);
    expect(await lock.release()).toBe(true);
    await (await waiter).release();
  });

  it('fenced quorum locks: fences rise strictly over QUORUM_FENCE_GRANTS grants by two instances, with one instance cut from node 3 and node 1 restarted empty (after a TTL down) midway', async () => {
    // A long run: QUORUM_FENCE_GRANTS=10000 (89 s on a shared 2-core machine).
    const total = Number(process.env.QUORUM_FENCE_GRANTS ?? 2_000);
    const ttlMs = 2_000;
    const fenced = app.get(FencedStore);
    const grants: Array<{ fence: number; by: string; phase: string }> = [];
    let phase = 'before';
    let inside = 0;
    const counts = { overlaps: 0, refusedWrites: 0, failedAttempts: 0 };
    let restarted: Promise<void> | undefined;
    // Node 3's counter is an hour ahead, as if its clock were (fences are floored by Redis TIME in
    // µs): grants that node 3 takes part in get fences an hour ahead, and the cut instance's grants
    // without it must still get higher ones.
    const [seconds] = await clients[2].time();
    await clients[2].set(`${valueKey('fenced-run')}:fence`, `${Number(seconds) + 3_600}000000`);
    const by = (phase: string, who: string) =>
      grants.filter((g) => g.phase === phase && g.by === who).length;
    // Phases by grant count: the partition from 1/4 to 1/2 of the run (and until the cut instance
    // was granted 3 times in it), the restart at 5/8.
    const advance = () => {
      const n = grants.length;
      if (phase === 'before' && n >= total / 4) {
        phase = 'partitioned';
        proxies[2].hold();
      } else if (phase === 'partitioned' && n >= total / 2 && by('partitioned', 'cut') >= 3) {
        phase = 'healed';
        proxies[2].resume();
      } else if (phase === 'healed' && n >= (5 * total) / 8) {
        phase = 'restarted';
        // Down for the TTL in use before it comes back empty, as docs/scaling.md prescribes
        // ("Restarts"): restarted at once, it could grant a lock that another holder kept on it
        // and one other node (a majority of 2), and two holders would overlap by design.
        restarted = servers[0]
          .stop()
          .then(() => new Promise((resolve) => setTimeout(resolve, ttlMs + 100)))
          .then(() => servers[0].restart())
          .then(() => {
            phase = 'back';
          });
      }
    };
    const run = async (service: LockService, by: string) => {
      // Past `total` until 100 grants came after node 1 was back (empty): its counter is new.
      while (grants.length < total || grants.filter((g) => g.phase === 'back').length < 100) {
        let lock: Lock;
        try {
          lock = await service.acquire('fenced-run', { ttlMs, waitMs: 10_000 });
        } catch {
          // A quorum out of reach for a moment (LockQuorumError) while node 1 is down.
          counts.failedAttempts++;
          continue;
        }
        if (++inside > 1) counts.overlaps++;
        grants.push({ fence: lock.fence, by, phase });
        if (!(await fenced.write('fenced-run', lock.fence, by))) counts.refusedWrites++;
        inside--;
        advance();
        await lock.release().catch(() => undefined);
        // Work between sections, so that the other instance's waiter (woken by the release
        // message) wins its share instead of losing every race to this loop's next attempt; more
        // of it for the rival while the cut instance is partitioned, since an attempt of the cut
        // instance that the two reachable nodes split waits for the cut node's command timeout.
        const pause =
          by === 'rival' && phase === 'partitioned' ? 10 + Math.random() * 10 : Math.random() * 2;
        await new Promise((resolve) => setTimeout(resolve, pause));
      }
    };
    try {
      await Promise.all([run(cut, 'cut'), run(rival, 'rival')]);
    } finally {
      proxies[2].resume();
      await restarted;
    }
    let notRising = 0;
    for (let i = 1; i < grants.length; i++) if (grants[i].fence <= grants[i - 1].fence) notRising++;
    const perPhase = Object.fromEntries(
      ['before', 'partitioned', 'healed', 'restarted', 'back'].map((p) => [
        p,
        `${by(p, 'cut')}+${by(p, 'rival')}`,
      ]),
    );
    console.log(
      `redlock: fenced quorum locks, ${grants.length} grants (cut+rival per phase ${JSON.stringify(perPhase)}): ` +
        `${notRising} not above the one before, ${JSON.stringify(counts)}`,
    );
    expect({ notRising, overlaps: counts.overlaps, refusedWrites: counts.refusedWrites }).toEqual({
      notRising: 0,
      overlaps: 0,
      refusedWrites: 0,
    });
    // Every phase saw grants by the instance it concerns.
    expect(by('partitioned', 'cut')).toBeGreaterThan(0);
    expect(by('restarted', 'cut') + by('restarted', 'rival')).toBeGreaterThan(0);
    expect(by('back', 'cut') + by('back', 'rival')).toBeGreaterThanOrEqual(100);
    expect(grants.every((g) => Number.isSafeInteger(g.fence) && g.fence > 0)).toBe(true);
  }, 600_000);

  it("a failed attempt's grant that runs after its undo (SCRIPT FLUSH on two live connections) is released again: the lock is not held by a dead token", async () => {
    const fresh = await createLockApp({
      keyPrefix: prefix,
      nodes: servers.map((s) => s.url),
      commandTimeoutMs: 300,
    });
    try {
      const quick = fresh.get(LockService);
      // The acquire script was sent on each connection (EVALSHA next time), the release never was
      // (EVAL): after the flush, the attempt's NOSCRIPT fallback reaches nodes 1 and 2 after the
      // undo's release.
      expect(await quick.tryAcquire('q-warm', { ttlMs: 100 })).not.toBeNull();
      await new Promise((r) => setTimeout(r, 150));
      for (const c of clients.slice(0, 2)) {
        await c.script('FLUSH');
        await c.client('PAUSE', 600, 'ALL');
      }
      const pausedAt = Date.now();
      const attempt = await quick.tryAcquire('q-flushed', { ttlMs: 20_000 }).catch((e) => e);
      expect(attempt).toBeInstanceOf(LockQuorumError);
      // Once the pause ended, both calls ran; then the lock is free on every node (before, held
      // on nodes 1 and 2 by the failed attempt's token for its 20 s).
      await new Promise((r) => setTimeout(r, Math.max(0, pausedAt + 700 - Date.now())));
      await waitFor(
        "'q-flushed' free on every node",
        async () => (await values('q-flushed')).every((v) => v === null),
        3_000,
      );
    } finally {
      await fresh.close();
    }
  });

  it('mutual exclusion: 2 processes x 150 read-modify-write sections leave an exact counter', async () => {
    // The counter lives on the module's `redis` (the shared test server), the locks on the nodes.
    const counter = redisClient();
    try {
      await expectExactCounter({
        processes: 2,
        sections: 150,
        env: {
          REDIS_URL: testRedisUrl(),
          MODULE_OPTIONS_JSON: JSON.stringify({ nodes: servers.map((s) => s.url) }),
        },
        counter,
        prefix,
      });
    } finally {
      counter.disconnect();
    }
  }, 120_000);

  it('the queue keeps using `redis`', async () => {
    const queues = app.get(QueueService);
    await queues.enqueue('q', 'x');
    const probe = redisClient();
    try {
      expect(await probe.zcard(`${prefix}queue:{q}:due`)).toBe(1);
    } finally {
      probe.disconnect();
    }
    expect((await queues.pop('q')).map((t) => t.id)).toEqual(['x']);
  });

  describe('options', () => {
    it.each([
      [{ nodes: ['redis://a:1', 'redis://b:1'] }, 'nodes'],
      [{ nodes: 'redis://a:1' }, 'nodes'],
      [{ nodes: ['redis://a:1', 'http://b', 'redis://c:1'] }, 'nodes[1]'],
      [
        { nodes: ['redis://a:1', 'redis://b:1', 'redis://c:1'], clockDriftFactor: 0.5 },
        'clockDriftFactor',
      ],
      [
        {
          nodes: ['redis://a:1', 'redis://b:1', 'redis://c:1'],
          waitForReplicas: { replicas: 1, timeoutMs: 10 },
        },
        'waitForReplicas',
      ],
      // One server given twice: a URL and an options object, ioredis' defaults filled in.
      [{ nodes: ['redis://a:6379', 'redis://b:1', { host: 'A' }] }, 'nodes'],
      [{ nodes: ['redis://a:1/2', 'redis://b:1', 'redis://a:1?db=2'] }, 'nodes'],
    ])('rejects module options %j naming %s', async (options, option) => {
      const err = await createLockApp(options as never).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect((err as RedisLockOptionsError).option).toBe(option);
    });

    it('names the two nodes given one address', async () => {
      const url = servers[0].url;
      const err = await createLockApp({ nodes: [url, servers[1].url, url] }).catch((e) => e);
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect((err as Error).message).toContain(`'nodes[0] and nodes[2] both 127.0.0.1:`);
    });

    it('fails the start when two nodes are one server under two addresses (one run_id), and does not check where INFO is refused', async () => {
      // nodes[1] reaches servers[0] through a proxy.
      const err = await createLockApp({
        nodes: [servers[0].url, proxies[0].url, servers[1].url],
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect((err as RedisLockOptionsError).option).toBe('nodes');
      expect((err as Error).message).toContain('nodes[0] and nodes[1], one server (run_id ');
      // An ACL user without INFO (as on some managed services): no verdict, the start goes on.
      await clients[0].call('ACL', 'SETUSER', 'no-info', 'on', '>pw', '~*', '&*', '+@all', '-info');
      const noInfo = (url: string) => ({
        host: '127.0.0.1',
        port: Number(new URL(url).port),
        username: 'no-info',
        password: 'pw',
        // ioredis' own ready check would use INFO too (and warn when it is refused).
        enableReadyCheck: false,
      });
      const started = await createLockApp({
        keyPrefix: prefix,
        nodes: [noInfo(servers[0].url), noInfo(proxies[0].url), servers[1].url],
      });
      await started.close();
    });

    it('refuses semaphores with RedisLockOptionsError naming nodes', async () => {
      const semaphores = app.get(SemaphoreService);
      const err = await semaphores.tryAcquire('s', { limit: 1 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect((err as RedisLockOptionsError).option).toBe('nodes');
      expect((err as Error).message).toContain('no nodes for semaphores');
    });

    it('rejects waitForReplicas per call in quorum mode', async () => {
      const err = await locks
        .acquire('x', { waitForReplicas: { replicas: 1, timeoutMs: 10 } })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect((err as RedisLockOptionsError).option).toBe('waitForReplicas');
    });
  });
});
