import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';
import { createRedisLock, RedisCommandError, type RedisLock } from '../../lib';
import { rateLimitRedisKey } from '../../lib/rate-limit/rate-limit-keys';
import { redisTimeMs, waitFor } from '../support/helpers';
import { startRedisServer, stopAllRedisServers, type RedisServer } from '../support/redis-server';

const usedMemory = async (admin: Redis) =>
  Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);

/**
 * A full Redis under `noeviction` (docs/redis-setup.md) refuses every write that adds data. Redis
 * checks a script for OOM only at its first deny-oom command, and only while the script has
 * written nothing: a script that first removes (ZREMRANGEBYSCORE, ZREM) writes past maxmemory.
 */
describe('On a full Redis (maxmemory, noeviction)', () => {
  let server: RedisServer;
  let admin: Redis;
  let lock: RedisLock;
  const prefix = 'oom:';

  beforeAll(async () => {
    server = await startRedisServer(['--maxmemory-policy', 'noeviction']);
    admin = new Redis(server.url);
    lock = await createRedisLock({
      redis: server.url,
      keyPrefix: prefix,
      queue: { keepCompleted: { ageMs: 50, count: 1_000 } },
    });
  });
  afterAll(async () => {
    await lock?.close();
    admin?.disconnect();
    await stopAllRedisServers();
  });

  /** Full: maxmemory just under what Redis holds, so any write that adds data is refused. */
  async function fill(): Promise<number> {
    const used = await usedMemory(admin);
    await admin.config('SET', 'maxmemory', String(used - 64 * 1024));
    await expect(admin.set('probe', 'x')).rejects.toThrow(/OOM/);
    return used;
  }
  afterEach(() => admin.config('SET', 'maxmemory', '0'));

  it('refuses sliding-window consumes on new keys with RedisCommandError OOM, in a batch behind a refusal too', async () => {
    const limit = { limit: 1_000, windowMs: 60_000 };
    // A window already full: its refusal in the same batch (one script) must not open the way.
    await lock.rateLimiter.consume('full', { ...limit, cost: 1_000 });
    const used = await fill();
    const keys = Array.from({ length: 20 }, (_, i) => `ip:${i}`);
    const results = await Promise.all(
      ['full', ...keys].map((key) =>
        lock.rateLimiter.consume(key, { ...limit, cost: 1_000 }).catch((e: unknown) => e),
      ),
    );
    expect(results[0]).toMatchObject({ allowed: false });
    const refused = results.slice(1);
    expect(refused.filter((r) => r instanceof RedisCommandError)).toHaveLength(keys.length);
    expect((refused[0] as Error).message).toMatch(
      /^Redis rate limit failed: OOM command not allowed/,
    );
    expect(
      await admin.exists(keys.map((k) => rateLimitRedisKey(prefix, 'sliding-window', k))),
    ).toBe(0);
    // 20,000 entries would be ~1.5 MB.
    expect(await usedMemory(admin)).toBeLessThan(used + 256 * 1024);
  });

  it('refuses shared (read) locks on new names with RedisCommandError OOM, and adds no key', async () => {
    await fill();
    const names = Array.from({ length: 20 }, (_, i) => `doc:${i}`);
    const results = await Promise.all(
      names.map((name) =>
        lock.locks.tryAcquire(name, { mode: 'shared', ttlMs: 60_000 }).catch((e: unknown) => e),
      ),
    );
    expect(results.filter((r) => r instanceof RedisCommandError)).toHaveLength(names.length);
    expect((results[0] as Error).message).toMatch(/OOM command not allowed/);
    expect(await admin.keys(`${prefix}*doc:*`)).toEqual([]);
  });

  it('still obliterates a queue (with force, a leased task too): deleting frees memory', async () => {
    await lock.queues.enqueue('old', ['a', 'b', 'c'], { payload: 'x'.repeat(10_000) });
    await lock.queues.claim('old', 1);
    await fill();
    await expect(lock.queues.enqueue('old', 'd')).rejects.toThrow(/OOM command not allowed/);
    await lock.queues.obliterate('old', { force: true });
    expect(await lock.queues.stats('old')).toMatchObject({ ready: 0, leased: 0 });
  });

  it('refuses enqueues that first drop something: an id added again (dead, cancelled, kept completed past its window), a deduplicated one with stale entries, a replace', async () => {
    const q = 'again';
    await lock.queues.enqueue(q, ['d1', 'k1']);
    const claimed = await lock.queues.claim(q, 2);
    await lock.queues.nack(
      claimed.find((t) => t.id === 'd1')!,
      { maxAttempts: 1 },
    );
    await lock.queues.ack(claimed.find((t) => t.id === 'k1')!);
    await lock.queues.enqueue(q, 'c1', { delayMs: 60_000 });
    await lock.queues.cancel(q, 'c1');
    // A deduplication entry whose task finished: stale, dropped by the next call that sees it.
    await lock.queues.enqueue(q, 'dd1', { deduplication: { id: 'once' } });
    await lock.queues.ack((await lock.queues.claim(q, 1))[0]);
    await lock.queues.enqueue(q, 'r2', { delayMs: 60_000 });
    // k1's keepCompleted window (50 ms) ended.
    await new Promise((r) => setTimeout(r, 60));
    await fill();
    const big = { payload: 'p'.repeat(20_000) };
    const calls = [
      lock.queues.enqueue(q, 'd1', big),
      lock.queues.enqueue(q, 'c1', big),
      lock.queues.enqueue(q, 'k1', big),
      lock.queues.enqueue(q, 'dd2', { ...big, deduplication: { id: 'twice' } }),
      lock.queues.enqueue(q, 'r2', { ...big, replace: true }),
    ];
    for (const call of calls) await expect(call).rejects.toThrow(/OOM command not allowed/);
    expect(await lock.queues.get(q, 'd1')).toMatchObject({ state: 'dead' });
    expect(await lock.queues.get(q, 'c1')).toMatchObject({ state: 'cancelled' });
    expect(await lock.queues.get(q, 'dd2')).toBeUndefined();
  });

  it('refuses the task of a schedule tick (the warning says OOM) and adds nothing', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      await lock.queues.schedule('reports', 'daily', {
        everyMs: 50,
        // The first tick once Redis is full.
        startAt: (await redisTimeMs(admin)) + 300,
        payload: { big: 'p'.repeat(50_000) },
      });
      await fill();
      const oom = () => warn.mock.calls.map(String).filter((w) => /daily.*OOM/.test(w));
      await waitFor(
        'the tick to be refused or enqueued',
        async () => oom().length > 0 || (await lock.queues.stats('reports')).ready > 0,
        5_000,
        20,
      );
      expect((await lock.queues.stats('reports')).ready).toBe(0);
      expect(oom()[0]).toMatch(
        /schedule 'daily' of queue 'reports' failed: Redis [a-z -]+ failed: OOM command not allowed/,
      );
    } finally {
      warn.mockRestore();
    }
  });
});
