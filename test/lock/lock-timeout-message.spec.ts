import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { LockService, LockTimeoutError } from '../../lib';
import { createLockApp, uniquePrefix } from '../support/helpers';

/** The number in "held by another owner for N ms more". */
function heldForMs(err: LockTimeoutError): number {
  const match = /held by another owner for (\d+) ms more/.exec(err.message);
  if (!match) throw new Error(`no holder time in: ${err.message}`);
  return Number(match[1]);
}

describe('LockTimeoutError', () => {
  const prefix = uniquePrefix('lock-timeout-message');
  const TTL_MS = 30_000;
  let waiterApp: INestApplicationContext;
  let holderApp: INestApplicationContext;
  let locks: LockService;
  let holder: LockService;

  beforeAll(async () => {
    waiterApp = await createLockApp({ keyPrefix: prefix });
    holderApp = await createLockApp({ keyPrefix: prefix });
    locks = waiterApp.get(LockService);
    holder = holderApp.get(LockService);
  });
  afterAll(async () => {
    await Promise.all([waiterApp.close(), holderApp.close()]);
  });

  // The holder took the lock with TTL_MS before the wait began, so after waiting `waitedMs` at
  // most TTL_MS - waitedMs of its TTL are left; the TTL seen by the first attempt is more.
  it('says how long the holder holds the lock as of the timeout, not as of the first attempt', async () => {
    const held = await holder.acquire('parked', { ttlMs: TTL_MS });
    const err = await locks.acquire('parked', { waitMs: 600 }).catch((e: unknown) => e);
    await held.release();
    expect(err).toBeInstanceOf(LockTimeoutError);
    const timeout = err as LockTimeoutError;
    expect(timeout.waitedMs).toBeGreaterThanOrEqual(600);
    expect(heldForMs(timeout)).toBe(timeout.holderRemainingMs);
    expect(heldForMs(timeout)).toBeLessThanOrEqual(TTL_MS - timeout.waitedMs);
  });

  it('does so for a multi-key lock too (waiting outside any line)', async () => {
    const held = await holder.acquire('pair:b', { ttlMs: TTL_MS });
    const err = await locks
      .acquire(['pair:a', 'pair:b'], { waitMs: 600, retryIntervalMs: 100 })
      .catch((e: unknown) => e);
    await held.release();
    expect(err).toBeInstanceOf(LockTimeoutError);
    const timeout = err as LockTimeoutError;
    expect(heldForMs(timeout)).toBeLessThanOrEqual(TTL_MS - timeout.waitedMs);
  });
});
