import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { Lock, LockLostError, LockService, RedisUnavailableError } from '../../lib';
import {
  createLockApp,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitFor,
  waitForLine,
} from '../support/helpers';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import { LatencyProxy } from './support/latency-proxy';
import { reportFaults } from './support/fault-report';
import { PROFILE, PROFILE_NAME } from './support/profile';

const { acquisitions, longSections } = PROFILE.slowNetwork;
const TTL_MS = 1_000;
/** One-way delays: a round trip then costs 20 % and 40 % of the TTL. */
const DELAYS = [100, 200];
/**
 * One-way delay of the link too slow to extend in time: a round trip costs 0.8 of the TTL. When
 * the signal aborts, Redis still has the lock for at least this long (the last extension Redis
 * ran arrived this much after it was sent); the test reads it within that window.
 */
const TOO_SLOW_MS = 400;

describe(`Fault: slow network (a TCP proxy delaying every packet, profile ${PROFILE_NAME})`, () => {
  const prefix = uniquePrefix('faults-slow');
  let proxy: LatencyProxy;
  let app: INestApplicationContext;
  let direct: INestApplicationContext;
  let slowLocks: LockService;
  let fastLocks: LockService;
  let redis: Redis;
  const stats = {
    operations: 0,
    longestAcquireMs: 0,
    smallestMarginMs: Infinity,
    strayMs: 0,
    /** Expiries overstated, locks lapsed or lost while extended, aborts after Redis let go. */
    violations: 0,
  };

  beforeAll(async () => {
    proxy = new LatencyProxy(Number(new URL(testRedisUrl()).port), 0);
    const url = await proxy.start();
    app = await createLockApp({ redis: url, keyPrefix: prefix });
    direct = await createLockApp({ keyPrefix: prefix });
    slowLocks = app.get(LockService);
    fastLocks = direct.get(LockService);
    redis = redisClient();
    await slowLocks.isLocked('warm-up');
  });
  afterAll(async () => {
    await app.close();
    await direct.close();
    await proxy.close();
    redis.disconnect();
    reportFaults({
      scenario: '4 slow network',
      operations: stats.operations,
      faults: proxy.chunks,
      violations: stats.violations,
      longestUnavailabilityMs: Math.max(stats.longestAcquireMs, stats.strayMs),
      note:
        `one-way delays ${DELAYS.join('/')} ms, TTL ${TTL_MS} ms; faults = delayed packets; ` +
        `longest acquisition ${stats.longestAcquireMs} ms; expiresAt below the real expiry by ` +
        `at least ${stats.smallestMarginMs} ms; a timed-out acquisition blocked its key ` +
        `${stats.strayMs} ms`,
    });
  });

  /**
   * Checks `lock.expiresAt` against the key's real expiry, read over a direct connection: the
   * real expiry is at least `readAt + pttl`, so this bound proves it is not overstated.
   */
  const expectNotOverstated = async (lock: Lock, key: string) => {
    const readAt = Date.now();
    const pttl = await redis.pttl(`${prefix}lock:{${key}}`);
    if (pttl <= 0) stats.violations++;
    expect(pttl).toBeGreaterThan(0);
    const margin = readAt + pttl - lock.expiresAt;
    stats.smallestMarginMs = Math.min(stats.smallestMarginMs, margin);
    if (margin < -1) stats.violations++;
    expect(margin).toBeGreaterThanOrEqual(-1); // PTTL has 1 ms resolution
  };

  it.each(DELAYS)(
    'expiresAt = send time + TTL − drift: it leaves out the %i ms each way the acquisition took',
    async (delay) => {
      proxy.delayMs = delay;
      for (let i = 0; i < acquisitions; i++) {
        const key = `acquire-${delay}-${i}`;
        const before = Date.now();
        const lock = await slowLocks.acquire(key, { ttlMs: TTL_MS });
        const after = Date.now();
        stats.operations++;
        stats.longestAcquireMs = Math.max(stats.longestAcquireMs, after - before);
        // The round trip took at least 2 × delay of the TTL, and expiresAt has it subtracted.
        expect(after - before).toBeGreaterThanOrEqual(2 * delay);
        // ...and the clock-drift allowance (clockDriftFactor 0.01 × TTL + 2 ms).
        const drift = 0.01 * TTL_MS + 2;
        expect(lock.expiresAt).toBeGreaterThanOrEqual(before + TTL_MS - drift);
        expect(lock.expiresAt).toBeLessThanOrEqual(after - 2 * delay + TTL_MS - drift);
        await expectNotOverstated(lock, key);
        expect(await lock.release()).toBe(true);
      }
    },
  );

  it('a lock handed over through the slow link does not overstate its expiry either', async () => {
    proxy.delayMs = DELAYS[DELAYS.length - 1];
    for (let i = 0; i < Math.ceil(acquisitions / 5); i++) {
      const key = `handoff-${i}`;
      const holder = await fastLocks.acquire(key, { ttlMs: 10_000 });
      const waiting = slowLocks.acquire(key, { ttlMs: TTL_MS, waitMs: 10_000 });
      await waitForLine(redis, prefix, key);
      expect(await holder.release()).toBe(true);
      const lock = await waiting;
      stats.operations += 2;
      expect(lock.fence).toBeGreaterThan(holder.fence);
      await expectNotOverstated(lock, key);
      expect(await lock.release()).toBe(true);
    }
  });

  it.each(
    DELAYS.slice(0, longSections === 1 ? 1 : DELAYS.length).map((d) => [d, (2 * d) / TTL_MS]),
  )(
    'withLock keeps extending in time over a %i ms link (round trip %f of the TTL) while the callback runs 4 TTLs',
    async (delay) => {
      proxy.delayMs = delay;
      for (let round = 0; round < Math.max(1, Math.floor(longSections / DELAYS.length)); round++) {
        const key = `long-${delay}-${round}`;
        const seen = new Set<string | null>();
        const expiries = new Set<number>();
        let lost = false;
        await slowLocks.withLock(
          key,
          async (lock) => {
            const end = Date.now() + 4 * TTL_MS;
            while (Date.now() < end) {
              // Watched over the direct connection: the key never lapses, never changes hands.
              seen.add(await redis.get(`${prefix}lock:{${key}}`));
              expiries.add(lock.expiresAt);
              lost ||= lock.signal.aborted;
              await new Promise((r) => setTimeout(r, 25));
            }
            if (seen.size !== 1 || !seen.has(lock.token) || lost) stats.violations++;
            expect([...seen]).toEqual([lock.token]);
          },
          { ttlMs: TTL_MS },
        );
        stats.operations += expiries.size;
        expect(lost).toBe(false);
        // Extended at least every TTL / 3 for 4 TTLs: expiresAt moved forward many times.
        expect(expiries.size).toBeGreaterThanOrEqual(6);
        expect(await redis.exists(`${prefix}lock:{${key}}`)).toBe(0);
      }
    },
    30_000,
  );

  it(`on a link too slow to extend in time (round trip ${(2 * TOO_SLOW_MS) / TTL_MS} of the TTL), lock.signal aborts while Redis still has the lock`, async () => {
    proxy.delayMs = TOO_SLOW_MS;
    const key = 'too-slow';
    let stillHeldAtAbort: boolean | undefined;
    let reason: unknown;
    await slowLocks.withLock(
      key,
      async (lock) => {
        await new Promise<void>((resolve) => {
          const onAbort = () => {
            reason = lock.signal.reason;
            // Read over the direct connection at once: the key's real expiry is at least one
            // one-way delay (TOO_SLOW_MS) after the local one that aborted the signal.
            void redis.get(`${prefix}lock:{${key}}`).then((v) => {
              stillHeldAtAbort = v === lock.token;
              resolve();
            });
          };
          // (Already aborted when the grant itself arrived late on a stalled machine.)
          if (lock.signal.aborted) onAbort();
          else lock.signal.addEventListener('abort', onAbort);
        });
      },
      { ttlMs: TTL_MS },
    );
    stats.operations++;
    if (!stillHeldAtAbort) stats.violations++;
    expect(reason).toBeInstanceOf(LockLostError);
    expect(stillHeldAtAbort).toBe(true);
  });

  it('an acquisition that times out on the slow link does not leave its key blocked for a TTL', async () => {
    proxy.delayMs = 400;
    const impatient = await createLockApp({
      redis: proxy.url,
      keyPrefix: prefix,
      commandTimeoutMs: 300,
    });
    try {
      // Every call takes 800 ms there: wait for the connection itself, not for an answer.
      const client = impatient.get(RedisLockConnection).client;
      await waitFor('the impatient app connected', () => client.status === 'ready', 10_000, 20);
      const key = 'stray';
      const started = Date.now();
      const err = await impatient
        .get(LockService)
        .acquire(key, { ttlMs: 30_000 })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisUnavailableError);
      stats.operations++;
      // The late acquisition lands on Redis and takes the key; the release queued behind it
      // frees it one round trip later, not after the 30 s TTL.
      let appeared = 0;
      await waitFor(
        'the stray acquisition to arrive and be undone',
        async () => {
          const held = (await redis.exists(`${prefix}lock:{${key}}`)) === 1;
          if (held && !appeared) appeared = Date.now();
          return appeared > 0 && !held;
        },
        10_000,
        2,
      );
      stats.strayMs = Date.now() - appeared;
      expect(Date.now() - started).toBeLessThan(10_000);
      const lock = await fastLocks.acquire(key);
      expect(await lock.release()).toBe(true);
    } finally {
      await impatient.close();
    }
  });
});
