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

    it('accepts an equal fence (the same holder writing again) and a higher one', async () => {
      expect(await store.write('r3', 5, 'a')).toBe(true);
      expect(await store.write('r3', 5, 'b')).toBe(true);
      expect(await store.read('r3')).toEqual({ value: 'b', fence: 5 });
      expect(await store.write('r3', 9, 'c')).toBe(true);
      expect(await store.read('r3')).toEqual({ value: 'c', fence: 9 });
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
      expect(await redis.exists(`${prefix}fenced:{order:42}`)).toBe(1);
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
