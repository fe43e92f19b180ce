import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  FencedStore,
  LockKeyError,
  LockService,
  RedisLockOptionsError,
  RedisUnavailableError,
} from '../../lib';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import { clusterKeySlot } from '../../lib/redis/cluster-slot';
import { taggedKey } from '../../lib/redis/tagged-key';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer } from '../support/redis-server';

describe('FencedStore', () => {
  const prefix = uniquePrefix('fenced-store');
  let app: INestApplicationContext;
  let store: FencedStore;
  let locks: LockService;
  let redis: Redis;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    store = app.get(FencedStore);
    locks = app.get(LockService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  describe('write / read', () => {
    it('stores a value with its fence in one hash under a hash tag, and reads it back', async () => {
      expect(await store.read('r1')).toBeNull();
      expect(await store.write('r1', 3, 'three')).toBe(true);
      expect(await store.read('r1')).toEqual({ value: 'three', fence: 3 });
      expect(await redis.hgetall(`${prefix}fenced:{r1}`)).toEqual({ fence: '3', value: 'three' });
    });

    it('refuses a write with a lower fence than the highest seen, and keeps the newer value', async () => {
      expect(await store.write('r2', 7, 'new')).toBe(true);
      expect(await store.write('r2', 6, 'stale')).toBe(false);
      expect(await store.write('r2', 1, 'older')).toBe(false);
      expect(await store.read('r2')).toEqual({ value: 'new', fence: 7 });
    });

    it('accepts an equal bare fence after a bare-fence write (the anonymous writer) and a higher one', async () => {
      expect(await store.write('r3', 5, 'a')).toBe(true);
      expect(await store.write('r3', 5, 'b')).toBe(true);
      expect(await store.read('r3')).toEqual({ value: 'b', fence: 5 });
      expect(await store.write('r3', 9, 'c')).toBe(true);
      expect(await store.read('r3')).toEqual({ value: 'c', fence: 9 });
    });

    it('remembers the writer token: an equal fence is accepted from that token only', async () => {
      const a = { fence: 20, token: 'token-a' };
      const b = { fence: 20, token: 'token-b' };
      expect(await store.write('t1', a, 'a1')).toBe(true);
      expect(await redis.hgetall(`${prefix}fenced:{t1}`)).toEqual({
        fence: '20',
        value: 'a1',
        token: 'token-a',
      });
      expect(await store.write('t1', a, 'a2')).toBe(true);
      // Same fence, another token (two holders handed one fence): refused.
      expect(await store.write('t1', b, 'b')).toBe(false);
      // Same fence, no token: it cannot show it is the writer that wrote, so refused too.
      expect(await store.write('t1', 20, 'bare')).toBe(false);
      expect(await store.read('t1')).toEqual({ value: 'a2', fence: 20, token: 'token-a' });
      // A higher fence is accepted from anyone, and a bare one forgets the token.
      expect(await store.write('t1', { fence: 21, token: 'token-b' }, 'b21')).toBe(true);
      expect(await store.write('t1', 22, 'bare22')).toBe(true);
      expect(await redis.hgetall(`${prefix}fenced:{t1}`)).toEqual({ fence: '22', value: 'bare22' });
      // Where the last write gave a bare fence, a token with the same fence is refused.
      expect(await store.write('t1', { fence: 22, token: 'token-a' }, 'a22')).toBe(false);
      expect(await store.read('t1')).toEqual({ value: 'bare22', fence: 22 });
    });

    it('keeps any string value intact: empty, unicode, binary-looking, 1 MB', async () => {
      const values = ['', 'ünïcødé ✓ 漢字', '\u0000\r\n{"json":true}', 'x'.repeat(1_000_000)];
      let fence = 1;
      for (const value of values) {
        expect(await store.write('r4', fence, value)).toBe(true);
        expect(await store.read('r4')).toEqual({ value, fence });
        fence++;
      }
    });

    it('compares fences as numbers, not as strings (10 > 9)', async () => {
      expect(await store.write('r5', 9, 'nine')).toBe(true);
      expect(await store.write('r5', 10, 'ten')).toBe(true);
      expect(await store.write('r5', 9, 'nine again')).toBe(false);
      expect(await store.write('r5', Number.MAX_SAFE_INTEGER, 'max')).toBe(true);
      expect(await store.write('r5', Number.MAX_SAFE_INTEGER - 1, 'below max')).toBe(false);
      expect(await store.read('r5')).toEqual({ value: 'max', fence: Number.MAX_SAFE_INTEGER });
    });

    it("keeps a resource's own {tag}, so it shares the Cluster slot of the lock with that tag", async () => {
      expect(await store.write('{order:42}', 1, 'x')).toBe(true);
      expect(await redis.exists(`${prefix}fenced:{order:42}{}`)).toBe(1);
      // The keys the library builds for both hash to one Cluster slot.
      expect(clusterKeySlot(taggedKey(prefix, 'fenced', '{order:42}'))).toBe(
        clusterKeySlot(lockRedisKeys(prefix, '{order:42}').value),
      );
    });
  });

  describe('check', () => {
    it('tells whether a write with a fence would be accepted now, without writing', async () => {
      expect(await store.check('c1', 1)).toBe(true);
      await store.write('c1', 4, 'four');
      expect(await store.check('c1', 3)).toBe(false);
      expect(await store.check('c1', 4)).toBe(true);
      expect(await store.check('c1', 5)).toBe(true);
      expect(await store.read('c1')).toEqual({ value: 'four', fence: 4 });
    });

    it('answers by the rules of write for a writer with a token', async () => {
      await store.write('c2', { fence: 8, token: 'mine' }, 'eight');
      expect(await store.check('c2', { fence: 8, token: 'mine' })).toBe(true);
      expect(await store.check('c2', { fence: 8, token: 'theirs' })).toBe(false);
      expect(await store.check('c2', 8)).toBe(false);
      expect(await store.check('c2', { fence: 9, token: 'theirs' })).toBe(true);
      expect(await store.check('c2', { fence: 7, token: 'mine' })).toBe(false);
    });
  });

  describe('with LockService fences', () => {
    it("refuses the old holder's write once the next holder of the lock wrote", async () => {
      const first = await locks.acquire('account:7', { ttlMs: 5_000 });
      expect(await store.write('account:7', first.fence, 'first')).toBe(true);
      await first.release();
      const second = await locks.acquire('account:7', { ttlMs: 5_000 });
      expect(second.fence).toBeGreaterThan(first.fence);
      expect(await store.write('account:7', second.fence, 'second')).toBe(true);
      // The first holder comes back late, still believing it holds the lock:
      expect(await store.write('account:7', first.fence, 'late')).toBe(false);
      expect(await store.read('account:7')).toEqual({ value: 'second', fence: second.fence });
      await second.release();
    });

    it('takes the Lock itself: its holder writes again, another token with its fence is refused', async () => {
      const lock = await locks.acquire('account:8', { ttlMs: 5_000 });
      expect(await store.write('account:8', lock, 'one')).toBe(true);
      expect(await store.write('account:8', lock, 'two')).toBe(true);
      expect(await store.check('account:8', lock)).toBe(true);
      // What a failover that lost the counter's last increments would hand another holder.
      const twin = { fence: lock.fence, token: 'another holder' };
      expect(await store.check('account:8', twin)).toBe(false);
      expect(await store.write('account:8', twin, 'twin')).toBe(false);
      expect(await store.read('account:8')).toEqual({
        value: 'two',
        fence: lock.fence,
        token: lock.token,
      });
      await lock.release();
    });
  });

  describe('fences across a failover', () => {
    it('a fence counter that lost its last increments still hands out a higher fence', async () => {
      const { fence: fenceKey } = lockRedisKeys(prefix, 'lost-incr');
      const first = await locks.acquire('lost-incr');
      await first.release();
      const second = await locks.acquire('lost-incr');
      await second.release();
      // A promoted replica that missed the last increments: the counter is back where it was
      // before the first grant, or gone.
      await redis.set(fenceKey, String(first.fence - 1_000));
      const third = await locks.acquire('lost-incr');
      await third.release();
      expect(third.fence).toBeGreaterThan(second.fence);
      await redis.del(fenceKey);
      const fourth = await locks.acquire('lost-incr');
      await fourth.release();
      expect(fourth.fence).toBeGreaterThan(third.fence);
    });

    it('a counter ahead of the clock still rises by one (fences never repeat)', async () => {
      const { fence: fenceKey } = lockRedisKeys(prefix, 'ahead');
      const ahead = 8_000_000_000_000_000; // year 2223 in microseconds, below 2^53
      await redis.set(fenceKey, String(ahead), 'PX', 60_000);
      const lock = await locks.acquire('ahead');
      await lock.release();
      expect(lock.fence).toBe(ahead + 1);
      expect(await redis.pttl(fenceKey)).toBeGreaterThan(0);
    });

    it('counter and clock compare as numbers: a shorter counter is behind, whatever its digits, and so in a handoff', async () => {
      // The scripts compare them as strings of digits (fence-counter.lua): '9' sorts after the
      // clock's '17…' as text, yet is behind it.
      const { fence: fenceKey, line } = lockRedisKeys(prefix, 'digits');
      await redis.set(fenceKey, '9', 'PX', 60_000);
      const [seconds, micros] = await redis.time();
      const clockUs = Number(seconds) * 1_000_000 + Number(micros);
      const first = await locks.acquire('digits');
      expect(typeof first.fence).toBe('number');
      expect(first.fence).toBeGreaterThanOrEqual(clockUs);
      expect(await redis.get(fenceKey)).toBe(String(first.fence));
      // Handed over to another instance (a waiter of this one would get it from its own cohort):
      // it stands in the lock's line, and its fence comes in release.lua's handoff message.
      const other = await createLockApp({ keyPrefix: prefix });
      try {
        const waiting = other.get(LockService).acquire('digits', { waitMs: 5_000 });
        await waitFor('the waiter in line', async () => (await redis.zcard(line)) === 1);
        await first.release();
        const second = await waiting;
        await second.release();
        expect(typeof second.fence).toBe('number');
        expect(second.fence).toBeGreaterThan(first.fence);
        expect(await redis.get(fenceKey)).toBe(String(second.fence));
      } finally {
        await other.close();
      }
    });

    it('a promoted replica that missed the last grants hands out higher fences (two real servers)', async () => {
      // No 5 s pause before the replica's first sync.
      const master = await startRedisServer(['--repl-diskless-sync-delay', '0']);
      const replica = await startRedisServer(['--replicaof', '127.0.0.1', String(master.port)]);
      const onMaster = await createLockApp({ redis: master.url, commandTimeoutMs: 2_000 });
      const onReplica = await createLockApp({ redis: replica.url, commandTimeoutMs: 2_000 });
      const replicaClient = redisClient(replica.url);
      const masterStore = onMaster.get(FencedStore);
      const { fence: fenceKey } = lockRedisKeys('', 'stock');
      try {
        const masterLocks = onMaster.get(LockService);
        const first = await masterLocks.acquire('stock');
        expect(await masterStore.write('stock', first, '10')).toBe(true);
        await first.release();
        await waitFor(
          'the replica to have the first fence',
          async () => {
            return Number(await replicaClient.get(fenceKey)) === first.fence;
          },
          20_000,
        );
        // The replica is cut off; the master goes on granting (these increments are lost).
        await replicaClient.replicaof('NO', 'ONE');
        let last = first;
        for (let i = 0; i < 20; i++) {
          last = await masterLocks.acquire('stock');
          expect(await masterStore.write('stock', last, String(9 - i))).toBe(true);
          await last.release();
        }
        expect(Number(await replicaClient.get(fenceKey))).toBe(first.fence);
        // The replica is promoted (it already answers writes): its next fence is above the
        // master's last, so the resource (which saw the master's writes) accepts it.
        const promoted = await onReplica.get(LockService).acquire('stock');
        expect(promoted.fence).toBeGreaterThan(last.fence);
        expect(await masterStore.write('stock', promoted, 'after failover')).toBe(true);
        await promoted.release();
      } finally {
        replicaClient.disconnect();
        await onMaster.close();
        await onReplica.close();
        await replica.stop();
        await master.stop();
      }
    });
  });

  describe('invalid arguments', () => {
    const badNames: unknown[] = [undefined, null, 0, 1, true, {}, [], ['a'], () => 'a', ''];
    const badFences: unknown[] = [0, -1, 1.5, NaN, Infinity, -Infinity, 2 ** 53, '1', null, {}];
    const badValues: unknown[] = [undefined, null, 1, true, {}, ['a'], Symbol('v'), 10n];

    it('rejects an invalid resource name with LockKeyError naming the problem', async () => {
      for (const name of [...badNames, 'x'.repeat(513), 'é'.repeat(257)]) {
        await expect(store.write(name as string, 1, 'v')).rejects.toBeInstanceOf(LockKeyError);
        await expect(store.read(name as string)).rejects.toBeInstanceOf(LockKeyError);
        await expect(store.check(name as string, 1)).rejects.toBeInstanceOf(LockKeyError);
      }
      await expect(store.write('', 1, 'v')).rejects.toThrow(
        'fenced resource name must not be empty',
      );
      await expect(store.write('x'.repeat(513), 1, 'v')).rejects.toThrow(/513 bytes long/);
    });

    it('rejects a fence that is not a positive safe integer with RedisLockOptionsError naming it', async () => {
      for (const fence of badFences) {
        const err = await store.write('bad-fence', fence as number, 'v').catch((e: unknown) => e);
        expect(err).toBeInstanceOf(RedisLockOptionsError);
        expect((err as RedisLockOptionsError).option).toBe('fence');
        await expect(store.check('bad-fence', fence as number)).rejects.toBeInstanceOf(
          RedisLockOptionsError,
        );
      }
      await expect(store.write('bad-fence', 0, 'v')).rejects.toThrow(
        "invalid option 'fence': expected a positive safe integer (lock.fence of a lock taken with fencing on), got 0",
      );
      expect(await redis.exists(`${prefix}fenced:{bad-fence}`)).toBe(0);
    });

    it('rejects a writer whose token is not a non-empty string with RedisLockOptionsError naming it', async () => {
      for (const token of [undefined, null, '', 7, {}, 'x'.repeat(513)]) {
        const writer = { fence: 3, token } as never;
        const err = await store.write('bad-token', writer, 'v').catch((e: unknown) => e);
        expect(err).toBeInstanceOf(RedisLockOptionsError);
        expect((err as RedisLockOptionsError).option).toBe('token');
        await expect(store.check('bad-token', writer)).rejects.toBeInstanceOf(
          RedisLockOptionsError,
        );
      }
      const zero = await store.write('bad-token', { fence: 0, token: 't' }, 'v').catch((e) => e);
      expect((zero as RedisLockOptionsError).option).toBe('fence');
      expect(await redis.exists(`${prefix}fenced:{bad-token}`)).toBe(0);
    });

    it('rejects a value that is not a string with RedisLockOptionsError naming it', async () => {
      for (const value of badValues) {
        const err = await store.write('bad-value', 1, value as string).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(RedisLockOptionsError);
        expect((err as RedisLockOptionsError).option).toBe('value');
      }
      expect(await redis.exists(`${prefix}fenced:{bad-value}`)).toBe(0);
    });
  });

  describe('when Redis is down', () => {
    it('fails with RedisUnavailableError within commandTimeoutMs, and works again after a restart', async () => {
      const server = await startRedisServer();
      const down = await createLockApp({ redis: server.url, commandTimeoutMs: 300 });
      try {
        const fenced = down.get(FencedStore);
        expect(await fenced.write('outage', 1, 'before')).toBe(true);
        await server.stop();
        const started = Date.now();
        await expect(fenced.write('outage', 2, 'during')).rejects.toBeInstanceOf(
          RedisUnavailableError,
        );
        await expect(fenced.read('outage')).rejects.toBeInstanceOf(RedisUnavailableError);
        await expect(fenced.check('outage', 2)).rejects.toBeInstanceOf(RedisUnavailableError);
        // Three calls bounded by 300 ms each; generous margin for a loaded machine.
        expect(Date.now() - started).toBeLessThan(5_000);
        await server.restart();
        // No persistence: the restarted server is empty.
        await waitFor(
          'a write after the restart',
          () => fenced.write('outage', 3, 'after').catch(() => false),
          10_000,
          50,
        );
        expect(await fenced.read('outage')).toEqual({ value: 'after', fence: 3 });
      } finally {
        await down.close();
        await server.stop();
      }
    });
  });
});
