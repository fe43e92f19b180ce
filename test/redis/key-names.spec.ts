import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import {
  FencedStore,
  LockService,
  LockTimeoutError,
  QueueService,
  SemaphoreService,
} from '../../lib';
import { lockNameOf, queueNameOf, throughputKey } from '../../lib/dashboard/dashboard-keys';
import { fencedRedisKey } from '../../lib/fencing/fenced-keys';
import { lockFenceKey, lockRedisKeys } from '../../lib/lock/lock-keys';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { scheduleRedisKeys } from '../../lib/queue/schedule/schedule-keys';
import { clusterKeySlot } from '../../lib/redis/cluster-slot';
import { decodeKeyName, encodeKeyName, hashTagOf, taggedKey } from '../../lib/redis/tagged-key';
import { semaphoreRedisKeys } from '../../lib/semaphore/semaphore-keys';
import { createLockApp, redisClient, uniquePrefix } from '../support/helpers';

const PREFIX = 'p:';

/** Every key (and channel) of every kind of object a caller can name `name`, by kind. */
function keysByKind(name: string): Record<string, string[]> {
  // A lock's fence counter is shared with the other locks of its slot (lock-keys.ts): the
  // property below checks that no name's key is one.
  const { name: _l, fence: _f, ...lock } = lockRedisKeys(PREFIX, name, 'slot');
  const { name: _s, ...sem } = semaphoreRedisKeys(PREFIX, name);
  const { name: _q, ...queue } = queueRedisKeys(PREFIX, name);
  const schedules = scheduleRedisKeys(PREFIX, name);
  return {
    lock: Object.values(lock),
    sem: Object.values(sem),
    queue: [
      ...Object.values(queue),
      schedules.definitions,
      schedules.state,
      throughputKey(PREFIX, name),
    ],
    fenced: [fencedRedisKey(PREFIX, name)],
    tick: [taggedKey(PREFIX, 'tick', name)],
  };
}

const allKeys = (name: string) => new Set(Object.values(keysByKind(name)).flat());

/** Names made of the pieces the old layout let collide: braces, colons, internal suffixes. */
const piece = fc.constantFrom('{', '}', ':', 'a', 'b', 'fence', 'line', 'meta', 'due', '_');
const name = fc.string({ unit: piece, minLength: 1, maxLength: 8 });
/** A name and one that wraps it: `{n}`, `{n}:fence`, `x{n}y`… (the issue's collisions). */
const related = fc
  .tuple(
    name,
    fc.constantFrom('', '{', 'x{'),
    fc.constantFrom('', ':fence', ':line', ':entries', ':meta', ':due', ':schedules', '}'),
  )
  .map(([n, open, suffix]) => [n, `${open}${open ? `${n}}` : n}${suffix}`] as const);

describe('Redis keys of caller-chosen names', () => {
  it('two distinct names never share a key or channel, of any kind of object (fast-check)', () => {
    fc.assert(
      fc.property(fc.oneof(fc.tuple(name, name), related), ([a, b]) => {
        fc.pre(a !== b);
        const theirs = allKeys(b);
        const shared = [...allKeys(a)].filter((k) => theirs.has(k));
        expect({ a, b, shared }).toEqual({ a, b, shared: [] });
      }),
      { numRuns: 3_000 },
    );
  });

  it('no name of any kind of object addresses a fence counter (fast-check)', () => {
    fc.assert(
      fc.property(name, (n) => {
        const counters = [lockFenceKey(PREFIX), lockRedisKeys(PREFIX, n, 'slot').fence];
        expect(counters.filter((k) => allKeys(n).has(k))).toEqual([]);
      }),
      { numRuns: 2_000 },
    );
  });

  it('the keys of one object share one Cluster slot; a {tag} in the name decides it (fast-check)', () => {
    fc.assert(
      fc.property(name, (n) => {
        for (const keys of Object.values(keysByKind(n))) {
          expect(new Set(keys.map(clusterKeySlot)).size).toBe(1);
        }
        const lock = lockRedisKeys(PREFIX, n, 'slot');
        expect(clusterKeySlot(lock.fence)).toBe(clusterKeySlot(lock.value));
        const tag = hashTagOf(n);
        if (tag !== undefined) {
          expect(clusterKeySlot(lockRedisKeys(PREFIX, n).value)).toBe(clusterKeySlot(`{${tag}}`));
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it('a name without braces keeps its key: <prefix>lock:{name}', () => {
    expect(lockRedisKeys(PREFIX, 'order:42').value).toBe('p:lock:{order:42}');
    expect(queueRedisKeys(PREFIX, 'mail').due).toBe('p:queue:{mail}:due');
    expect(lockRedisKeys(PREFIX, '{order:42}:stock').value).toBe('p:lock:{order:42}:stock{}');
  });

  it('the name is read back from any key, as the dashboard discovers locks and queues (fast-check)', () => {
    fc.assert(
      fc.property(name, (n) => {
        expect(decodeKeyName(encodeKeyName(n))).toBe(n);
        const lock = lockRedisKeys(PREFIX, n);
        expect(lockNameOf(PREFIX, lock.value)).toBe(n);
        expect(lockNameOf(PREFIX, lock.fence)).toBeUndefined();
        expect(queueNameOf(PREFIX, queueRedisKeys(PREFIX, n).due, ['due'])).toBe(n);
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('Objects whose names look like other objects’ keys', () => {
  let app: INestApplicationContext;
  let redis: Redis;
  let prefix: string;
  let locks: LockService;
  let semaphores: SemaphoreService;
  let queues: QueueService;
  let fenced: FencedStore;

  beforeAll(async () => {
    redis = redisClient();
    prefix = uniquePrefix('keynames');
    app = await createLockApp({ keyPrefix: prefix });
    locks = app.get(LockService);
    semaphores = app.get(SemaphoreService);
    queues = app.get(QueueService);
    fenced = app.get(FencedStore);
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  /** Takes `first`, then `second` while `first` is held (both must be granted), frees both. */
  async function holdBoth<H extends { release(): Promise<unknown> }>(
    tryTake: (name: string) => Promise<H | null>,
    first: string,
    second: string,
  ): Promise<H> {
    const held = await tryTake(first);
    const other = await tryTake(second);
    expect([held === null, other === null]).toEqual([false, false]);
    await other!.release();
    await held!.release();
    return other!;
  }
  const tryLock = (name: string) => locks.tryAcquire(name, { ttlMs: 10_000 });
  const trySemaphore = (name: string) => semaphores.tryAcquire(name, { limit: 1 });

  it("lock 'y' is acquired while lock '{y}:fence' is held", async () => {
    expect((await holdBoth(tryLock, '{y}:fence', 'y')).fence).toBeGreaterThan(0);
  });

  it("a waiter on lock 'z' times out cleanly while lock '{z}:line' is held", async () => {
    const other = await locks.acquire('{z}:line', { ttlMs: 10_000 });
    const z = await locks.acquire('z', { ttlMs: 10_000 });
    await expect(locks.acquire('z', { waitMs: 100, fair: true })).rejects.toBeInstanceOf(
      LockTimeoutError,
    );
    await z.release();
    await other.release();
    const keys = lockRedisKeys(prefix, 'z');
    expect([await redis.exists(keys.line), await redis.exists(keys.entries)]).toEqual([0, 0]);
  });

  it("lock 'x' and lock '{x}' are two locks", async () => {
    await holdBoth(tryLock, 'x', '{x}');
  });

  it("semaphore 's' is acquired while semaphore '{s}:meta' is held; 't' and '{t}' are two", async () => {
    await holdBoth(trySemaphore, '{s}:meta', 's');
    await holdBoth(trySemaphore, 't', '{t}');
  });

  it("queue 'q' and queue '{q}' are two queues", async () => {
    await queues.enqueue('q', 'task-1');
    expect(await queues.get('{q}', 'task-1')).toBeUndefined();
    expect((await queues.stats('{q}')).ready).toBe(0);
    expect((await queues.stats('q')).ready).toBe(1);
  });

  it("fenced resource 'f' and '{f}' are two resources", async () => {
    expect(await fenced.write('f', 1, 'plain')).toBe(true);
    expect(await fenced.read('{f}')).toBeNull();
  });
});
