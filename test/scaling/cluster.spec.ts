import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import fc from 'fast-check';
import { Cluster, type Redis } from 'ioredis';
import {
  LockKeyError,
  LockService,
  QueueFullError,
  QueueService,
  RedisLockError,
  RedisLockOptionsError,
  RedisLockEvents,
  RedisUnavailableError,
  type Lock,
} from '../../lib';
import { lockFenceKey, lockRedisKeys } from '../../lib/lock/lock-keys';
import { LOCK_SCRIPTS } from '../../lib/lock/lock-scripts';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { toRedisError } from '../../lib/redis/bounded';
import { clusterKeySlot } from '../../lib/redis/cluster-slot';
import { PubSubHub } from '../../lib/redis/pubsub-hub';
import { exited, killSpawnedChildren, lineFrom, spawnTs } from '../support/child';
import { expectExactCounter } from '../support/exact-counter';
import {
  blockedClients,
  createLockApp,
  deferred,
  redisClient,
  scriptCalls,
  testRedisUrl,
  uniquePrefix,
  waitFor,
  queueStats,
} from '../support/helpers';
import {
  expectAckedOnce,
  killOneWorkerPerWave,
  spawnQueueWorker,
  waitQueueDrained,
} from '../support/queue-crash';
import { startRedisCluster, type RedisClusterProcesses } from '../support/redis-cluster';
import { expectTasksPassedOn } from '../support/named-pass-on';
import { askNode } from '../support/redis-node';

/** Lock names whose slots are served by three different masters (one per master). */
async function namesOnEveryMaster(cluster: RedisClusterProcesses, tag: string): Promise<string[]> {
  const byMaster = new Map<number, string>();
  for (let i = 0; byMaster.size < 3; i++) {
    const name = `${tag}-${i}`;
    const master = await cluster.masterOfSlot(clusterKeySlot(`{${name}}`));
    if (!byMaster.has(master)) byMaster.set(master, name);
  }
  return [...byMaster.values()];
}

describe('Redis Cluster: 3 masters + 3 replicas, real redis-server processes', () => {
  const prefix = uniquePrefix('cluster');
  let cluster: RedisClusterProcesses;
  let app: INestApplicationContext;
  let locks: LockService;
  let queues: QueueService;
  let direct: Cluster;
  let obs: Redis;
  const moduleOptions = () => ({ redis: { cluster: cluster.startupNodes }, keyPrefix: prefix });
  /** The environment of a child process using the library on the cluster. */
  const childEnv = () => ({
    REDIS_URL: testRedisUrl(),
    PREFIX: prefix,
    MODULE_OPTIONS_JSON: JSON.stringify({ redis: { cluster: cluster.startupNodes } }),
  });

  beforeAll(async () => {
    cluster = await startRedisCluster();
    app = await createLockApp({ ...moduleOptions(), commandTimeoutMs: 1_000 });
    locks = app.get(LockService);
    queues = app.get(QueueService);
    direct = new Cluster(cluster.startupNodes, { redisOptions: { commandTimeout: 1_000 } });
    // CLUSTER commands are sent before the client is ready; wait for its slot map.
    await new Promise((resolve) => direct.once('ready', resolve));
    obs = redisClient();
  }, 90_000);
  afterAll(async () => {
    // Children of a failed test: stopped before the cluster they use.
    await killSpawnedChildren();
    await app?.close();
    direct?.disconnect();
    obs?.disconnect();
    await cluster?.stop();
  });

  describe('keys and slots', () => {
    it('computes the slot of any key exactly like CLUSTER KEYSLOT', async () => {
      const braces = fc
        .array(fc.constantFrom('{', '}', 'a', 'b', ':', 'é', '日', '😀', ' '), { maxLength: 12 })
        .map((parts) => parts.join(''));
      await fc.assert(
        fc.asyncProperty(fc.oneof(braces, fc.string({ unit: 'binary' })), async (key) => {
          expect(clusterKeySlot(key)).toBe(await direct.cluster('KEYSLOT', key));
        }),
        // Always tried: an empty tag ends the search (the whole key is hashed), a later '}' or
        // '{…}' does not count. cluster-key-slot 1.1.1/1.1.2 (ioredis' calculator) gets these wrong.
        { numRuns: 300, examples: [['{}}'], ['a{}b}c'], ['foo{}{bar}'], ['}{x}'], ['{']] },
      );
    });

    it("puts every key of a lock and every key of a queue in its name's slot", async () => {
      for (const name of ['order:42', '{order:42}:a', 'x{', 'é{}b']) {
        const l = lockRedisKeys(prefix, name, 'slot');
        const q = queueRedisKeys(prefix, name);
        const slots = new Set<number>();
        for (const key of [l.value, l.fence, l.line, l.entries, l.channel]) {
          slots.add(Number(await direct.cluster('KEYSLOT', key)));
        }
        expect(slots.size).toBe(1);
        slots.clear();
        for (const key of Object.values(q).slice(1)) {
          slots.add(Number(await direct.cluster('KEYSLOT', key)));
        }
        expect(slots.size).toBe(1);
      }
    });

    it("addresses every slot's fence counter from that slot (all 16,384; 256 by CLUSTER KEYSLOT)", async () => {
      const slots = Array.from({ length: 16_384 }, (_, slot) => slot);
      const misplaced = slots.filter((slot) => clusterKeySlot(lockFenceKey(prefix, slot)) !== slot);
      expect(misplaced).toEqual([]);
      // clusterKeySlot is checked against CLUSTER KEYSLOT above; a sample of the keys directly.
      for (const slot of slots.filter((s) => s % 64 === 0)) {
        expect(await direct.cluster('KEYSLOT', lockFenceKey(prefix, slot))).toBe(slot);
      }
    });

    it("distinct lock names leave only their slots' fence counters, and fences rise", async () => {
      const names = Array.from({ length: 60 }, (_, i) => `slot-shared:${i}`);
      for (const name of names) {
        const lock = await locks.acquire(name);
        expect(lock.fence).toBeGreaterThan(0);
        await lock.release();
        const again = await locks.acquire(name);
        expect(again.fence).toBeGreaterThan(lock.fence);
        await again.release();
      }
      const left: string[] = [];
      for (const node of direct.nodes('master')) {
        left.push(...(await node.keys(`${prefix}lock*`)));
      }
      const counters = new Set(names.map((n) => lockRedisKeys(prefix, n, 'slot').fence));
      expect(left.filter((k) => k.includes('slot-shared'))).toEqual([]);
      expect(left.filter((k) => counters.has(k)).sort()).toEqual([...counters].sort());
    });

    it('rejects a multi-key lock across slots with LockKeyError naming the keys and slots, and takes one with a common {tag}', async () => {
      const err = await locks.acquire(['cart:1', 'stock:1']).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockKeyError);
      expect((err as LockKeyError).key).toEqual(['cart:1', 'stock:1']);
      expect((err as Error).message).toContain(
        `'cart:1' (slot ${clusterKeySlot('cart:1')}), 'stock:1' (slot ${clusterKeySlot('stock:1')})`,
      );
      expect((err as Error).message).toContain('hash tag');
      expect(await locks.isLocked('cart:1')).toBe(false);

      const lock = await locks.acquire(['{order:1}:cart', '{order:1}:stock']);
      expect(lock.fences.every((f) => f > 0)).toBe(true);
      expect(await direct.get(`${prefix}lock:{order:1}:stock{}`)).toBe(lock.token);
      expect(await lock.release()).toBe(true);
    });
  });

  describe('locks', () => {
    it('wakes waiters on every master by sharded pub/sub (SPUBLISH), fair handoff and free alike', async () => {
      const names = await namesOnEveryMaster(cluster, 'wake');
      // The holder's TTL and the poll interval are far longer than the wait, so only a release
      // message can let a waiter in before its wait runs out.
      const slow = { waitMs: 8_000, retryIntervalMs: 60_000 };
      // Waiters of another instance (this one's own callers would wait in its local cohorts).
      const other = await createLockApp({ ...moduleOptions(), commandTimeoutMs: 1_000 });
      const waiters = other.get(LockService);
      for (const fair of [true, false]) {
        const held = await Promise.all(names.map((n) => locks.acquire(n, { ttlMs: 60_000 })));
        const waiting = names.map((n) => waiters.acquire(n, { ...slow, fair }));
        await waitFor('every waiter subscribed', async () => {
          for (const n of names) {
            const channel = lockRedisKeys(prefix, n).channel;
            const [, count] = (await direct.call('PUBSUB', 'SHARDNUMSUB', channel)) as [
              string,
              number,
            ];
            if (count < 1) return false;
          }
          return true;
        });
        await Promise.all(held.map((l) => l.release()));
        const got: Lock[] = await Promise.all(waiting);
        expect(got.map((l) => l.keys[0])).toEqual(names);
        await Promise.all(got.map((l) => l.release()));
      }
      await other.close();
    });

    it("waitForReplicas sends WAIT to the master of the lock's slot: its replica holds the token", async () => {
      const name = 'durable';
      const master = await cluster.masterOfSlot(clusterKeySlot(`{${name}}`));
      const nodes = await cluster.view();
      const masterId = nodes.find((n) => n.port === master)!.id;
      const replicaPort = nodes.find((n) => n.masterId === masterId)!.port;
      const replica = redisClient(`redis://127.0.0.1:${replicaPort}`);
      try {
        const lock = await locks.acquire(name, {
          waitForReplicas: { replicas: 1, timeoutMs: 2_000 },
        });
        // A replica answers reads of its own slots after READONLY.
        await replica.readonly();
        expect(await replica.get(`${prefix}lock:{${name}}`)).toBe(lock.token);
        expect(await lock.extend()).toBe(true);
        await lock.release();
      } finally {
        replica.disconnect();
      }
    });

    it("a replica-confirmed call's first script on a master goes by EVAL: no NOSCRIPT reply from an emptied cache, whose EVAL would come after what was sent behind it", async () => {
      const durableMaster = await cluster.masterOfSlot(clusterKeySlot('{durable}'));
      let name = '';
      for (let i = 0; !name; i++) {
        const master = await cluster.masterOfSlot(clusterKeySlot(`{flushed-${i}}`));
        if (master !== durableMaster) name = `flushed-${i}`;
      }
      const node = redisClient(
        `redis://127.0.0.1:${await cluster.masterOfSlot(clusterKeySlot(`{${name}}`))}`,
      );
      try {
        // Every lock script back in the cache but the extension, which the WAIT connection sends.
        await node.script('FLUSH');
        for (const script of Object.values(LOCK_SCRIPTS)) {
          if (script !== LOCK_SCRIPTS.extend) await node.script('LOAD', script.source);
        }
        await node.config('RESETSTAT');
        const lock = await locks.acquire(name, {
          waitForReplicas: { replicas: 1, timeoutMs: 2_000 },
        });
        expect(await lock.extend()).toBe(true);
        await lock.release();
        expect(await node.info('errorstats')).not.toMatch(/NOSCRIPT/);
      } finally {
        node.disconnect();
      }
    });

    it('mutual exclusion: 3 processes x 150 read-modify-write sections on the cluster leave an exact counter', async () => {
      await expectExactCounter({
        processes: 3,
        sections: 150,
        env: { ...childEnv(), KEY: 'mutex' },
        counter: direct,
        prefix,
      });
    }, 120_000);
  });

  describe('queue', () => {
    it('an idle worker blocks on the master of its queue and wakes within one round trip of an enqueue', async () => {
      const name = 'cluster-wake';
      const master = await cluster.masterOfSlot(clusterKeySlot(`{${name}}`));
      const probe = redisClient(`redis://127.0.0.1:${master}`);
      try {
        // Load the scripts on that master, so that no NOSCRIPT retry is counted below.
        await queues.enqueue(name, 'warm-up');
        await queues.pop(name);
        let ranAt = 0;
        let callsWhenRun = -1;
        const ran = deferred();
        const worker = queues.process(name, async () => {
          ranAt = Date.now();
          callsWhenRun = await scriptCalls(probe);
          ran.resolve();
        });
        try {
          await waitFor(
            'the worker blocked on the queue master',
            async () => (await blockedClients(probe)) === 1,
          );
          const before = await scriptCalls(probe);
          const enqueuedAt = Date.now();
          await queues.enqueue(name, 'now');
          await ran.promise;
          // The enqueue and exactly one claim, both on this master: woken by BLPOP, not by polling.
          expect(callsWhenRun - before).toBe(2);
          // Woken by the enqueue, not by the end of its bounded idle wait (MAX_IDLE_MS, 5 s, which
          // began just before): 1 s is generous for a loaded machine and far below that.
          expect(ranAt - enqueuedAt).toBeLessThan(1_000);
        } finally {
          await worker.close();
        }
      } finally {
        probe.disconnect();
      }
    });

    it("ioredis commandTimeout of the Cluster's nodes does not cut an idle worker's BLPOP short (the module's copies drop it)", async () => {
      const timed = await createLockApp({
        redis: {
          cluster: cluster.startupNodes,
          options: { redisOptions: { commandTimeout: 200 } },
        },
        keyPrefix: prefix,
      });
      const errors: string[] = [];
      const off = timed
        .get(RedisLockEvents)
        .on('worker.error', ({ operation }) => errors.push(operation));
      const worker = timed.get(QueueService).process('timed-idle', async () => undefined);
      // Idle: the worker blocks for seconds, far longer than the nodes' commandTimeout.
      await new Promise((r) => setTimeout(r, 800));
      await worker.close();
      off();
      await timed.close();
      expect(errors).toEqual([]);
    });

    it('bounded queues, results, waitFor, events and cancel work on the cluster (queues on different masters)', async () => {
      const names = ['cluster-bounded-a', 'cluster-bounded-b', 'cluster-bounded-c'];
      const masters = await Promise.all(
        names.map((n) => cluster.masterOfSlot(clusterKeySlot(`{${n}}`))),
      );
      expect(new Set(masters).size).toBeGreaterThan(1);
      for (const name of names) await queues.setMaxSize(name, 50);
      // 100 enqueues on each queue, all three queues in the same tick, racing for a bound of 50:
      // exactly 50 added, 50 refused, in the order of the calls. Merged per queue: the first
      // queue's batch goes as two calls (nothing was in flight), the others' whole (two were);
      // the bound is checked call by call, in order, on each queue's master.
      const perQueue = await Promise.all(
        names.map((name) =>
          Promise.all(
            Array.from({ length: 100 }, (_, i) =>
              queues.enqueue(name, `t${i}`).then(
                (n) => (n === 1 ? 'added' : 'other'),
                (err: unknown) => (err instanceof QueueFullError ? 'full' : String(err)),
              ),
            ),
          ),
        ),
      );
      for (const outcomes of perQueue) {
        expect(outcomes.filter((o) => o === 'added')).toHaveLength(50);
        expect(outcomes.filter((o) => o === 'full')).toHaveLength(50);
        expect(outcomes).toEqual([
          ...Array.from({ length: 50 }, () => 'added'),
          ...Array.from({ length: 50 }, () => 'full'),
        ]);
      }
      const [a] = names;
      const seen: string[] = [];
      const sub = queues.events(a).subscribe((e) => seen.push(`${e.type}:${e.taskId}`));
      const worker = queues.process(a, async (task) => ({ id: task.id }), { concurrency: 5 });
      try {
        await waitFor('drained', async () => (await queues.stats(a)).completed === 50, 30_000);
        expect(await queues.waitFor(a, 't0')).toEqual({ state: 'completed', result: { id: 't0' } });
        expect(await queues.cancel(names[1], 't1')).toBe('cancelled');
        expect((await queues.get(names[1], 't1'))?.state).toBe('cancelled');
        await waitFor(
          'events read',
          () => seen.filter((e) => e.startsWith('completed:')).length > 0,
        );
      } finally {
        sub.unsubscribe();
        await worker.close();
      }
    });

    it('named handlers, expiring tasks, the runtime limiter, metrics and the workers registry work on the cluster (queues on different masters)', async () => {
      const [named, expiring, limited] = await namesOnEveryMaster(cluster, 'cluster-migrate');
      // Named handlers: each task runs in the handler of its name.
      const ran: string[] = [];
      const a = queues.process(named, async (t) => void ran.push(`a:${t.id}`), { name: 'a' });
      const b = queues.process(named, async (t) => void ran.push(`b:${t.id}`), { name: 'b' });
      // The runtime limiter: at most 2 starts per minute on every instance.
      await queues.setRateLimit(limited, { max: 2, durationMs: 60_000 });
      expect(await queues.getRateLimit(limited)).toEqual({ max: 2, durationMs: 60_000 });
      const l = queues.process(limited, async () => undefined);
      try {
        await queues.enqueue(named, 'x', { name: 'a' });
        await queues.enqueue(named, 'y', { name: 'b' });
        await queues.enqueue(limited, ['l1', 'l2', 'l3']);
        // Expiring tasks: a paused queue's task past its deadline ends expired, never run.
        await queues.pause(expiring);
        await queues.enqueue(expiring, 'late', { expiresInMs: 50 });
        const e = queues.process(expiring, async () => {
          throw new Error('an expired task ran');
        });
        try {
          await waitFor(
            'expired',
            async () => (await queues.get(expiring, 'late'))?.state === 'expired',
          );
        } finally {
          await e.close();
        }
        await waitFor('named ran', () => ran.length === 2);
        expect(ran.sort()).toEqual(['a:x', 'b:y']);
        await waitFor('two started', async () => (await queues.stats(limited)).completed === 2);
        expect((await queues.stats(limited)).ready).toBe(1);
        // The workers registry lists this instance's workers of each queue.
        const listed = await queues.workers(named);
        expect(listed.flatMap((w) => w.names).sort()).toEqual(['a', 'b']);
        // Metrics: one minute's counts, written to the queue's own slot.
        await queues.store.metrics.flush(true);
        const points = await queues.metrics(named);
        expect(points.reduce((n, p) => n + p.completed, 0)).toBe(2);
        expect((await queues.metrics(expiring)).reduce((n, p) => n + p.expired, 0)).toBe(1);
      } finally {
        await Promise.all([a.close(), b.close(), l.close()]);
      }
    });

    it("a named-handler loop leaves a task of a name it has no handler for to the queue's other worker (the workers registry, in the queue's slot)", () =>
      expectTasksPassedOn(queues, 'pass-on'));

    it('crash safety: 600 tasks, 3 worker processes, 2 SIGKILLs: no task lost, each acked once', async () => {
      const queue = 'crash';
      const TASKS = 600;
      const obsPrefix = `${prefix}q:`;
      const spawnWorker = () =>
        spawnQueueWorker({
          ...childEnv(),
          PREFIX: obsPrefix,
          OBS_REDIS_URL: testRedisUrl(),
          QUEUE: queue,
          LEASE_MS: '800',
          CONCURRENCY: '8',
        });
      const crashApp = await createLockApp({ ...moduleOptions(), keyPrefix: obsPrefix });
      try {
        const crashQueues = crashApp.get(QueueService);
        const ids = Array.from({ length: TASKS }, (_, i) => `task-${i}`);
        const alive = new Set(await Promise.all([spawnWorker(), spawnWorker(), spawnWorker()]));
        const inFlightAtKill = await killOneWorkerPerWave({
          queues: crashQueues,
          queue,
          ids,
          waves: 2,
          obs,
          obsPrefix,
          alive,
          spawnWorker,
        });
        await waitQueueDrained(crashQueues, queue);
        for (const w of alive) w.child.kill('SIGTERM');
        await Promise.all([...alive].map((w) => exited(w.child)));

        expect(await crashQueues.stats(queue)).toMatchObject(queueStats());
        await expectAckedOnce(obs, obsPrefix, ids, inFlightAtKill);
      } finally {
        await crashApp.close();
      }
    }, 120_000);
  });

  describe('boot check', () => {
    it('a single-node config pointed at a Cluster node fails the start with RedisLockOptionsError naming the option to use', async () => {
      const { port } = cluster.startupNodes[0];
      const url = `redis://127.0.0.1:${port}`;
      const err = await createLockApp({ redis: url, keyPrefix: prefix }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect((err as RedisLockOptionsError).option).toBe('redis');
      expect((err as Error).message).toContain(`127.0.0.1:${port}, a Redis Cluster node`);
      expect((err as Error).message).toContain('redis: { cluster: [{ host, port }, …], options }');

      // Quorum nodes that are Cluster nodes are named by their option.
      const nodes = cluster.startupNodes.slice(0, 3).map((n) => `redis://127.0.0.1:${n.port}`);
      const quorum = await createLockApp({ nodes, keyPrefix: prefix }).catch((e: unknown) => e);
      expect(quorum).toBeInstanceOf(RedisLockOptionsError);
      expect((quorum as RedisLockOptionsError).option).toBe('nodes');
    });
  });

  describe('pub/sub across failovers', () => {
    const shardSubscribers = async (port: number, channel: string) =>
      Number(((await askNode(port, 'PUBSUB', 'SHARDNUMSUB', channel)) as [string, number])[1]);

    it('an unsubscription that ioredis sends again after a later subscription is undone: the channel is subscribed and heard', async () => {
      // ioredis retries an SUNSUBSCRIBE that met a closed connection (a killed master) every
      // retryDelayOnFailover ms; across a failover, it can reach the new master after the
      // SSUBSCRIBE of the channel's next listener. Held back here until that SSUBSCRIBE was
      // answered, as such a retry would.
      const sub = direct.duplicate([], { shardedSubscribers: true });
      const sunsubscribe = sub.sunsubscribe.bind(sub);
      let sendHeldBack: (() => Promise<unknown>) | undefined;
      (sub as { sunsubscribe: unknown }).sunsubscribe = (...args: string[]) =>
        new Promise((resolve, reject) => {
          sendHeldBack = () => sunsubscribe(...args).then(resolve, reject);
        });
      const hub = new PubSubHub(() => sub, true, 1_000);
      try {
        const channel = `${prefix}late-unsubscribe:{hub}`;
        const master = await cluster.masterOfSlot(clusterKeySlot(channel));
        const heard: string[] = [];
        let resubscribed = 0;
        (await hub.listen(channel, () => undefined))();
        // The last listener left: the hub unsubscribes after its linger.
        await waitFor('the SUNSUBSCRIBE sent', () => sendHeldBack !== undefined, 10_000, 20);
        await hub.listen(
          channel,
          (m) => heard.push(m),
          () => resubscribed++,
        );
        expect(await shardSubscribers(master, channel)).toBe(1);
        await sendHeldBack!();
        // The listener is told once the hub's SSUBSCRIBE was answered; the server counts the
        // subscriber a moment before that reply arrives, so the count alone is not the signal.
        await waitFor('the channel subscribed again', () => resubscribed === 1, 5_000, 20);
        expect(await shardSubscribers(master, channel)).toBe(1);
        expect(resubscribed).toBe(1);
        await direct.spublish(channel, 'after');
        await waitFor('the message heard', () => heard.includes('after'));
      } finally {
        hub.close();
      }
    });

    it("re-subscribes a channel when ioredis' subscriber of its master is cut off, and tells its listeners", async () => {
      const sub = direct.duplicate([], { shardedSubscribers: true, slotsRefreshInterval: 1_000 });
      const hub = new PubSubHub(() => sub, true, 1_000);
      try {
        const channel = `${prefix}cut-off:{hub}`;
        const master = await cluster.masterOfSlot(clusterKeySlot(channel));
        const heard: string[] = [];
        let resubscribed = 0;
        await hub.listen(
          channel,
          (m) => heard.push(m),
          () => resubscribed++,
        );
        expect(await shardSubscribers(master, channel)).toBe(1);
        await askNode(master, 'CLIENT', 'KILL', 'TYPE', 'pubsub');
        await waitFor('the listener told', () => resubscribed > 0, 10_000, 20);
        expect(await shardSubscribers(master, channel)).toBe(1);
        await direct.spublish(channel, 'after');
        await waitFor('the message heard', () => heard.includes('after'));
        // Once per pass: ioredis reports the cut (-node), then its subscribers re-made.
        expect(resubscribed).toBeGreaterThanOrEqual(1);
        expect(resubscribed).toBeLessThanOrEqual(2);
      } finally {
        hub.close();
      }
    });

    it('SIGKILL of the master of a hot lock mid-sale (twice), then a coordinated failover: on the promoted master every instance is subscribed again and every instance keeps selling', async () => {
      const salePrefix = `${prefix}sale:`;
      const key = 'hot';
      const channel = lockRedisKeys(salePrefix, key).channel;
      const tags = ['a', 'b', 'c'];
      const sold = (tag: string) =>
        direct.get(`${salePrefix}{sold}:${tag}`).then((v) => Number(v ?? 0));
      const children = tags.map((TAG) =>
        spawnTs('test/fixtures/cluster-sale-child.ts', [], {
          ...childEnv(),
          PREFIX: salePrefix,
          KEY: key,
          TAG,
        }),
      );
      const killed: number[] = [];
      try {
        await Promise.all(children.map((child) => lineFrom(child, /^selling$/, 60_000)));
        for (let kill = 0; kill < 2; kill++) {
          const master = await cluster.masterOfSlot(clusterKeySlot(channel));
          await waitFor(
            'every instance subscribed before the kill',
            async () => (await shardSubscribers(master, channel)) === tags.length,
            10_000,
            20,
          );
          killed.push(master);
          const promoted = await cluster.killMaster(master);
          const before = await Promise.all(tags.map(sold));
          // Each instance sells 50 more units: the sale goes on everywhere.
          await waitFor(
            'every instance selling again',
            async () => (await Promise.all(tags.map(sold))).every((n, i) => n >= before[i] + 50),
            30_000,
            50,
          );
          // ...and each one is woken by its subscription, not by its line renewal alone.
          await waitFor(
            'every instance subscribed on the promoted master',
            async () => (await shardSubscribers(promoted, channel)) === tags.length,
            10_000,
            20,
          );
          await cluster.restart(master);
          killed.pop();
          await cluster.waitHealthy();
        }
        // A coordinated failover keeps the old master alive (no subscriber connection ends):
        // the subscriptions follow when the command client meets MOVED and refreshes its map.
        const master = await cluster.masterOfSlot(clusterKeySlot(channel));
        const promoted = await cluster.failover(master);
        await waitFor(
          'every instance subscribed on the new master after a coordinated failover',
          async () => (await shardSubscribers(promoted, channel)) === tags.length,
          10_000,
          20,
        );
      } finally {
        for (const child of children) child.kill('SIGTERM');
        await Promise.all(children.map((child) => exited(child)));
        for (const port of killed) await cluster.restart(port);
        if (killed.length > 0) await cluster.waitHealthy();
      }
    }, 180_000);
  });

  describe('resharding', () => {
    it('while the slot of a held lock is MIGRATING, lock calls answer or fail with RedisUnavailableError, never RedisCommandError', async () => {
      const name = 'migrating';
      const { value } = lockRedisKeys(prefix, name, 'slot');
      // Taken once first, so that the slot's fence counter is on the source with the lock's
      // value: the keys the scripts are given are there; the line they name after it is not.
      await (await locks.acquire(name)).release();
      // Held by another instance (this one's own callers would wait in its local cohort).
      await direct.set(value, 'another-owner', 'PX', 10_000);
      const slot = clusterKeySlot(value);
      const masters = (await cluster.view()).filter((n) => n.role === 'master' && !n.failing);
      const source = masters.find((n) => n.slots.some(([a, b]) => slot >= a && slot <= b))!;
      const target = masters.find((n) => n !== source && n.slots.length > 0)!;
      // What `redis-cli --cluster reshard` does first for every slot it moves.
      await askNode(target.port, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id);
      await askNode(source.port, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', target.id);
      const outcome = (call: Promise<unknown>) =>
        call.then(
          (v) => (v === null ? 'null' : typeof v),
          (err: unknown) => (err as Error).name,
        );
      try {
        const outcomes = [
          await outcome(locks.tryAcquire(name, { ttlMs: 1_000 })),
          await outcome(locks.acquire(name, { ttlMs: 1_000, waitMs: 200 })),
          await outcome(locks.isLocked(name)),
        ];
        for (const o of outcomes) {
          expect(['null', 'boolean', 'LockTimeoutError', 'RedisUnavailableError']).toContain(o);
        }
      } finally {
        await askNode(source.port, 'CLUSTER', 'SETSLOT', slot, 'STABLE');
        await askNode(target.port, 'CLUSTER', 'SETSLOT', slot, 'STABLE');
        await direct.del(value);
      }
    });
  });

  describe('failover', () => {
    interface Op {
      key: string;
      start: number;
      end: number;
      /** The error's class name, for a failed operation. */
      error?: string;
    }

    /** Error counts by class and how long after `from` the last failure (started by `to`) ended. */
    const summarize = (ops: Op[], from: number, to: number) => {
      const failed = ops.filter((o) => o.error && o.start >= from && o.start < to);
      const errors: Record<string, number> = {};
      for (const o of failed) errors[o.error!] = (errors[o.error!] ?? 0) + 1;
      return {
        errors,
        failuresEndedAfterMs: failed.length ? Math.max(...failed.map((o) => o.end)) - from : 0,
      };
    };

    it('maps what ioredis reports while slots move to RedisUnavailableError', () => {
      // Seen during a failover: ioredis followed MOVED until its redirection limit.
      for (const message of [
        'Too many Cluster redirections. Last error: ReplyError: MOVED 6977 127.0.0.1:33113',
        'CLUSTERDOWN The cluster is down',
        'TRYAGAIN Multiple keys request during rehashing of slot',
        // Resharding: a script touched its lock's line while the slot was MIGRATING.
        'ERR Script attempted to access a non local key in a cluster node script: 2b7fedd8',
      ]) {
        expect(toRedisError('lock acquire', new Error(message))).toBeInstanceOf(
          RedisUnavailableError,
        );
      }
    });

    it('a coordinated failover and a killed master during a locking loop: typed errors or success, nothing hangs, work resumes', async () => {
      const names = await namesOnEveryMaster(cluster, 'loop');
      const ops: Op[] = [];
      const untyped: unknown[] = [];
      /** Messages of failures other than RedisUnavailableError, for the report. */
      const details = new Set<string>();
      let running = true;
      let killed: number | undefined;
      const loop = async (key: string) => {
        while (running) {
          const start = Date.now();
          try {
            await locks.withLock(key, async (lock) => void (await lock.isHeld()), {
              waitMs: 2_000,
              ttlMs: 3_000,
              retryIntervalMs: 50,
            });
            ops.push({ key, start, end: Date.now() });
          } catch (err) {
            if (!(err instanceof RedisLockError)) untyped.push(err);
            ops.push({ key, start, end: Date.now(), error: (err as Error).name });
            if (!(err instanceof RedisUnavailableError)) details.add((err as Error).message);
            await new Promise((r) => setTimeout(r, 20));
          }
        }
      };
      // Every key's loop has had 3 successful operations since `t`.
      const resumedSince = (t: number) =>
        names.every(
          (key) => ops.filter((o) => o.key === key && !o.error && o.start >= t).length >= 3,
        );
      const loops = names.flatMap((key) => [loop(key), loop(key)]);
      try {
        await waitFor('the loop under way', () => resumedSince(0), 20_000, 20);

        // 1. CLUSTER FAILOVER on the replica of the master serving names[0].
        const failoverAt = Date.now();
        await cluster.failover(await cluster.masterOfSlot(clusterKeySlot(`{${names[0]}}`)));
        const failoverDone = Date.now();
        await waitFor(
          'work resumed after the failover',
          () => resumedSince(failoverDone),
          30_000,
          20,
        );
        const failoverResumed = Date.now();

        // 2. SIGKILL the master serving names[1]; its replica takes over after the node timeout.
        const killAt = Date.now();
        killed = await cluster.masterOfSlot(clusterKeySlot(`{${names[1]}}`));
        await cluster.killMaster(killed);
        const promotedAt = Date.now();
        await waitFor('work resumed after the kill', () => resumedSince(promotedAt), 30_000, 20);
        const killResumed = Date.now();
        running = false;
        await Promise.all(loops);

        const longest = Math.max(...ops.map((o) => o.end - o.start));
        console.log(
          'cluster failover outcomes: ' +
            JSON.stringify({
              operations: ops.length,
              failed: ops.filter((o) => o.error).length,
              longestOperationMs: longest,
              otherErrors: [...details],
              coordinatedFailover: {
                promotedAfterMs: failoverDone - failoverAt,
                everyKeyResumedAfterMs: failoverResumed - failoverAt,
                ...summarize(ops, failoverAt, killAt),
              },
              killedMaster: {
                promotedAfterMs: promotedAt - killAt,
                everyKeyResumedAfterMs: killResumed - killAt,
                ...summarize(ops, killAt, killResumed),
              },
            }),
        );
        // Every failure was a typed error of the library, and no operation hung: each ended within
        // its bound (wait 2 s; each command 1 s) plus a generous margin.
        expect(untyped).toEqual([]);
        expect(longest).toBeLessThan(10_000);
      } finally {
        running = false;
        await Promise.all(loops);
        if (killed !== undefined) {
          await cluster.restart(killed);
          await cluster.waitHealthy();
        }
      }
    }, 120_000);
  });
});
