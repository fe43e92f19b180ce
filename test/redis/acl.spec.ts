import 'reflect-metadata';
import { Injectable, Logger, type INestApplicationContext } from '@nestjs/common';
import { Cluster, Redis } from 'ioredis';
import {
  FencedStore,
  LockService,
  OncePerTick,
  QueueService,
  RateLimiterService,
  SemaphoreService,
  WaitingRoomService,
  type QueueEventType,
  type RedisLockModuleOptions,
} from '../../lib';
import { createLockApp, waitFor, waitForLine } from '../support/helpers';
import { documentedAcl } from '../support/documented-acl';
import { Interval } from '../support/schedule-interval';
import { NODE_HOST } from '../support/redis-node';
import { startRedisServer, stopAllRedisServers, type RedisServer } from '../support/redis-server';
import { startRedisCluster, type RedisClusterProcesses } from '../support/redis-cluster';

@Injectable()
class Jobs {
  runs = 0;

  // Called by hand (no ScheduleModule): the claim of its window goes through Redis.
  @Interval(60_000)
  @OncePerTick({ name: 'report' })
  async report(): Promise<string> {
    this.runs++;
    return 'ran';
  }
}

/**
 * Every feature, on two application instances `a` and `b`: locks (fencing, waiting, handoff
 * between instances and within one, multi-key, inspect, extend), FencedStore, read-write locks,
 * semaphores, the queue (enqueue, claim/ack, workers, progress and logs, events, waitFor, flows,
 * schedules, cancel, stats, obliterate, a stored rate limit), rate limits, the waiting room,
 * @OncePerTick.
 */
async function exerciseEverything(
  a: INestApplicationContext,
  b: INestApplicationContext,
  admin: Redis | Cluster,
  prefix: string,
): Promise<void> {
  const [locksA, locksB] = [a.get(LockService), b.get(LockService)];

  // Locks: a waiter of another instance is handed the lock with a larger fence.
  const first = await locksA.acquire('order:1', { ttlMs: 10_000 });
  expect(await locksB.tryAcquire('order:1')).toBeNull();
  const waiting = locksB.acquire('order:1', { waitMs: 10_000 });
  await waitForLine(admin as Redis, prefix, 'order:1');
  expect((await locksA.inspect('order:1')).lineLength).toBe(1);
  expect(await first.extend(20_000)).toBe(true);
  await first.release();
  const second = await waiting;
  expect(second.fence).toBeGreaterThan(first.fence);
  // Fencing: the older holder's write is refused.
  const fenced = a.get(FencedStore);
  expect(await fenced.write('stock', second, '5')).toBe(true);
  expect(await fenced.write('stock', first, '4')).toBe(false);
  expect((await fenced.read('stock'))?.value).toBe('5');
  expect(await locksB.isHeld(second)).toBe(true);
  await second.release();
  // Local handoff (cohort) within one instance, multi-key and withLock.
  const order: number[] = [];
  await Promise.all(
    [1, 2, 3].map((i) =>
      locksA.withLock('cohort', async () => void order.push(i), { waitMs: 10_000 }),
    ),
  );
  expect(order).toHaveLength(3);
  expect(await locksA.withLock(['{m}:1', '{m}:2'], async () => 'both')).toBe('both');
  expect(await locksA.isLocked('{m}:1')).toBe(false);

  // Read-write lock: two readers, a writer waits for both.
  const r1 = await locksA.acquire('doc', { mode: 'shared' });
  const r2 = await locksB.acquire('doc', { mode: 'shared' });
  const writer = locksA.acquire('doc', { waitMs: 10_000 });
  await r1.release();
  await r2.release();
  await (await writer).release();

  // Semaphore: a third caller waits for one of two permits.
  const [semA, semB] = [a.get(SemaphoreService), b.get(SemaphoreService)];
  const p1 = await semA.acquire('pool', { limit: 2 });
  const p2 = await semA.acquire('pool', { limit: 2 });
  const p3 = semB.acquire('pool', { limit: 2, waitMs: 10_000 });
  expect(await p1.extend(10_000)).toBe(true);
  await p1.release();
  await (await p3).release();
  await p2.release();

  // Queue.
  const queues = a.get(QueueService);
  const seen = new Set<QueueEventType>();
  const events = queues.events('mail').subscribe((e) => seen.add(e.type));
  const worker = b.get(QueueService).process(
    'mail',
    async (task) => {
      await task.progress({ step: 1 });
      await task.log(`sending ${task.id}`);
      return `sent ${task.id}`;
    },
    { concurrency: 2 },
  );
  try {
    expect(await queues.enqueue('mail', ['m1', 'm2'], { payload: { to: 'x' } })).toBe(2);
    expect(await queues.waitFor('mail', 'm1', { timeoutMs: 10_000 })).toEqual({
      state: 'completed',
      result: 'sent m1',
    });
    await queues.waitFor('mail', 'm2', { timeoutMs: 10_000 });
    expect(await queues.logs('mail', 'm1')).toEqual(['sending m1']);
    await queues.enqueue('mail', 'later', { delayMs: 60_000 });
    expect(await queues.cancel('mail', 'later')).toBe('cancelled');
    // A schedule's ticks are enqueued and run by the worker.
    await queues.schedule('mail', 'digest', { everyMs: 100 });
    await waitFor(
      'a scheduled task to complete',
      async () => (await queues.stats('mail')).completed > 2,
      10_000,
      20,
    );
    expect(await queues.unschedule('mail', 'digest')).toBe(true);
    await waitFor(
      'the events of the queue',
      () =>
        ['enqueued', 'active', 'completed', 'cancelled'].every((t) =>
          seen.has(t as QueueEventType),
        ),
      10_000,
    );
  } finally {
    events.unsubscribe();
    await worker.close();
  }
  // Claim and ack by hand; a flow (the parent runs after its child).
  await queues.enqueue('manual', 't1');
  const [task] = await queues.claim('manual', 1);
  expect(await queues.ack(task, { ok: true })).toBe(true);
  await queues.enqueueFlow({ queue: 'parents', id: 'p', children: [{ queue: 'kids', id: 'k' }] });
  const [kid] = await queues.claim('kids', 1);
  await queues.ack(kid, 1);
  await waitFor(
    'the parent to be claimable',
    async () => (await queues.top('parents')).length === 1,
  );
  const [parent] = await queues.claim('parents', 1);
  await queues.ack(parent);
  expect(await queues.waitFor('parents', 'p', { timeoutMs: 5_000 })).toMatchObject({
    state: 'completed',
  });

  // Obliterate: refused while a task is leased, then forced (the lease goes with the rest), and
  // a queue with nothing leased.
  await queues.enqueue('gone', ['g1', 'g2']);
  const [running] = await queues.claim('gone', 1);
  await expect(queues.obliterate('gone')).rejects.toThrow(
    "queue 'gone' not obliterated: 1 task(s) are leased",
  );
  await queues.obliterate('gone', { force: true });
  expect(await queues.stats('gone')).toMatchObject({ ready: 0, leased: 0 });
  expect(await queues.ack(running)).toBe(false);
  await queues.obliterate('manual');
  expect(await queues.stats('manual')).toMatchObject({ ready: 0, completed: 0 });

  // Rate limits, both algorithms, counted across instances.
  for (const algorithm of ['sliding-window', 'token-bucket'] as const) {
    const limit = { limit: 2, windowMs: 60_000, algorithm };
    expect((await a.get(RateLimiterService).consume('login', limit)).allowed).toBe(true);
    expect((await b.get(RateLimiterService).consume('login', limit)).allowed).toBe(true);
    expect((await a.get(RateLimiterService).consume('login', limit)).allowed).toBe(false);
  }

  // A queue's stored rate limit and how long until its window opens.
  await queues.setRateLimit('limited', { max: 1, durationMs: 60_000 });
  expect(await queues.rateLimitTtl('limited')).toBe(0);

  // Waiting room: one visitor in line on each instance, admitted in turn once the room opens.
  const [roomA, roomB] = [a.get(WaitingRoomService), b.get(WaitingRoomService)];
  await roomA.open('sale', { admitPerSecond: 0, passTtlMs: 60_000 });
  expect(await roomA.join('sale', 'v1')).toMatchObject({ admitted: false, position: 1 });
  const v2 = roomB.wait('sale', 'v2', { waitMs: 10_000 });
  await waitFor('v2 parked', () => roomB.localWaiters('sale') === 1);
  await roomA.open('sale', { admitPerSecond: 50, passTtlMs: 60_000 });
  await expect(v2).resolves.toMatchObject({ admitted: true });
  expect(await roomA.hasPass('sale', 'v1')).toBe(true);

  // @OncePerTick: one run per window across instances.
  expect(await a.get(Jobs).report()).toBe('ran');
  expect(await b.get(Jobs).report()).toBeUndefined();
}

/** `exerciseEverything` on two application instances made with `options` (closed after). */
async function onTwoInstances(options: RedisLockModuleOptions, admin: Redis | Cluster) {
  const a = await createLockApp(options, [Jobs]);
  try {
    const b = await createLockApp(options, [Jobs]);
    try {
      await exerciseEverything(a, b, admin, options.keyPrefix ?? '');
    } finally {
      await b.close();
    }
  } finally {
    await a.close();
  }
}

/**
 * What Redis refused since `ACL LOG RESET` (`object` of each entry: command, key or channel),
 * but the boot check's `CONFIG GET`: the documented lines leave `CONFIG` out on purpose (the
 * check then reads `INFO memory`).
 */
async function denied(admin: Redis): Promise<string[]> {
  const entries = (await admin.call('ACL', 'LOG', '128')) as string[][];
  return entries
    .map((entry) => {
      const at = (name: string) => entry[entry.indexOf(name) + 1];
      return `${at('reason')} ${at('object')} (${at('username')})`;
    })
    .filter((what) => what !== 'command config|get (app)');
}

describe('Under the minimal ACL of docs/redis-setup.md (a user restricted to the key prefix)', () => {
  let server: RedisServer;
  let admin: Redis;
  const prefix = 'acl:';

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
  });
  afterAll(async () => {
    admin.disconnect();
    await stopAllRedisServers();
  });

  it("every feature works on a single node, and Redis denied nothing but the boot check's CONFIG GET (ACL LOG)", async () => {
    await admin.call('ACL', 'SETUSER', 'app', ...documentedAcl('base', 'pw', prefix));
    await admin.call('ACL', 'LOG', 'RESET');
    const warn = jest.spyOn(Logger.prototype, 'warn');
    const options: RedisLockModuleOptions = {
      redis: `redis://app:pw@${NODE_HOST}:${server.port}`,
      keyPrefix: prefix,
    };
    try {
      await onTwoInstances(options, admin);
    } finally {
      warn.mockRestore();
    }
    expect(await denied(admin)).toEqual([]);
    // The startup checks ran under the user: the policy was read (from INFO), not "unchecked".
    expect(warn.mock.calls.map(String).filter((w) => /could not be checked/.test(w))).toEqual([]);
  });
});

describe('Under the minimal Cluster ACL of docs/redis-setup.md', () => {
  let cluster: RedisClusterProcesses;
  let admin: Cluster;
  const prefix = 'aclc:';

  beforeAll(async () => {
    cluster = await startRedisCluster({ replicas: 0 });
    admin = new Cluster(cluster.startupNodes);
  }, 60_000);
  afterAll(async () => {
    admin?.disconnect();
    await cluster?.stop();
  });

  it("every feature works on a 3-master Cluster, and no node denied anything but the boot check's CONFIG GET", async () => {
    const acl = documentedAcl('cluster', 'pw', prefix);
    const nodes = cluster.servers.map((s) => new Redis(s.port, NODE_HOST));
    try {
      for (const node of nodes) {
        await node.call('ACL', 'SETUSER', 'app', ...acl);
        await node.call('ACL', 'LOG', 'RESET');
      }
      const options: RedisLockModuleOptions = {
        redis: {
          cluster: cluster.startupNodes,
          options: { redisOptions: { username: 'app', password: 'pw' } },
        },
        keyPrefix: prefix,
      };
      await onTwoInstances(options, admin);
      for (const node of nodes) expect(await denied(node)).toEqual([]);
    } finally {
      for (const node of nodes) node.disconnect();
    }
  });
});
