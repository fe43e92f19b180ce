import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { Lock, LockLostError, LockService, SemaphoreService } from '../../lib';
import { GrantLifetime } from '../../lib/waiting/grant-lifetime';
import { clockDriftMs, holderDeadline, timerLatenessMs } from '../../lib/waiting/grant-deadline';
import { createLockApp, redisClient, uniquePrefix } from '../support/helpers';

/** Resolves once `signal` aborts (at once when it already has). */
function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener('abort', () => resolve(), { once: true }),
  );
}

describe("The holder's deadline: expiresAt and signal allow for clock drift and timer lateness", () => {
  const prefix = uniquePrefix('lock-deadline');
  let app: INestApplicationContext;
  let locks: LockService;
  let redis: Redis;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix, clockDriftFactor: 0.01 });
    locks = app.get(LockService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  it('expiresAt = sentAt + ttl − (clockDriftFactor × ttl + 2 ms); the timer is armed min(20 ms, ttl / 4) early', () => {
    expect(clockDriftMs(2_000, 0.01)).toBe(22);
    expect(holderDeadline(1_000, 2_000, 0.01)).toBe(2_978);
    // Never before the request was sent, however short the TTL.
    expect(holderDeadline(1_000, 1, 0.01)).toBe(1_000);
    expect(timerLatenessMs(2_000)).toBe(20);
    expect(timerLatenessMs(20)).toBe(5);
  });

  it('a lock acquired with ttl T reports expiresAt T − drift after the request was sent', async () => {
    const before = Date.now();
    const lock = await locks.acquire('formula', { ttlMs: 2_000 });
    const after = Date.now();
    expect(lock.expiresAt).toBeGreaterThanOrEqual(before + 2_000 - 22);
    expect(lock.expiresAt).toBeLessThanOrEqual(after + 2_000 - 22);
    await lock.extend(4_000);
    expect(lock.expiresAt).toBeLessThanOrEqual(Date.now() + 4_000 - 42);
    await lock.release();
  });

  it('the signal aborts while Redis still holds the lock for its holder, so nobody else can have it yet (every one of 10 locks)', async () => {
    // Ten locks at once (TTLs 37 ms apart, so that their timers do not fire together), none
    // extended. Right as each one's signal aborts, the abort listener sends GET + PTTL of its key:
    // Redis answers them as it would answer anyone else trying to take the lock at that moment.
    const held = await Promise.all(
      Array.from({ length: 10 }, (_, i) => locks.acquire(`margin-${i}`, { ttlMs: 2_000 + 37 * i })),
    );
    const seen = await Promise.all(
      held.map(
        (lock) =>
          new Promise<{ lock: Lock; value: string | null; pttl: number }>((resolve, reject) => {
            const key = `${prefix}lock:{${lock.keys[0]}}`;
            lock.signal.addEventListener('abort', () => {
              redis
                .multi()
                .get(key)
                .pttl(key)
                .exec()
                .then((replies) => {
                  const [[, value], [, pttl]] = replies as [[null, string | null], [null, number]];
                  resolve({ lock, value, pttl });
                }, reject);
            });
          }),
      ),
    );
    for (const { lock, value, pttl } of seen) {
      expect(lock.signal.reason).toBeInstanceOf(LockLostError);
      expect(value).toBe(lock.token);
      expect(pttl).toBeGreaterThan(0);
    }
    console.log(
      `Redis PTTL left when the signal aborted (ttl 2000-2333 ms: drift 22-25 ms, timer 20 ms early): ${seen
        .map((s) => s.pttl)
        .sort((a, b) => a - b)
        .join(', ')} ms`,
    );
    await Promise.all(held.map((lock) => lock.release()));
  });

  it('a lock counts as lost (isLost, key-based calls forget it) from the time its timer is armed for', async () => {
    const lock: Lock = await locks.acquire('lost-flag', { ttlMs: 400 });
    await aborted(lock.signal);
    expect(lock.isLost).toBe(true);
    // The key-based calls no longer find it: it is dropped as having run out.
    expect(await locks.release('lost-flag')).toBe(false);
  });

  it('semaphore permits follow the same deadline', async () => {
    const semaphores = app.get(SemaphoreService);
    const before = Date.now();
    const permit = await semaphores.acquire('sem-deadline', { limit: 2, ttlMs: 1_000 });
    expect(permit.expiresAt).toBeGreaterThanOrEqual(before + 1_000 - 12);
    expect(permit.expiresAt).toBeLessThanOrEqual(Date.now() + 1_000 - 12);
    await permit.release();
  });

  describe('GrantLifetime (fake timers)', () => {
    beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
    afterEach(() => jest.useRealTimers());

    it('aborts the signal timerLatenessMs(ttl) before expiresAt, and counts as lost from then', () => {
      const lifetime = new GrantLifetime(1_000_000 + 978, 1_000, () => new Error('lost'));
      const signal = lifetime.signal;
      jest.advanceTimersByTime(957);
      expect(signal.aborted).toBe(false);
      expect(lifetime.isLost).toBe(false);
      jest.advanceTimersByTime(1);
      expect(signal.aborted).toBe(true);
      expect(lifetime.isLost).toBe(true);
    });

    it('moves the armed timer when extended', () => {
      const lifetime = new GrantLifetime(1_000_000 + 500, 1_000, () => new Error('lost'));
      const signal = lifetime.signal;
      jest.advanceTimersByTime(400);
      lifetime.setExpiresAt(Date.now() + 500);
      jest.advanceTimersByTime(479);
      expect(signal.aborted).toBe(false);
      jest.advanceTimersByTime(1);
      expect(signal.aborted).toBe(true);
    });
  });
});
