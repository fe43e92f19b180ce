import { Redis } from 'ioredis';
import { BENCH_TTL_MS, type HeldLock, type LockAdapter } from './lock-adapter';

/**
 * What the harness uses of a `Redlock` instance: `redlock` 5 and its maintained fork
 * `@sesamecare-oss/redlock` have the same API.
 */
export interface RedlockLike {
  acquire(resources: string[], duration: number): Promise<unknown>;
  release(lock: unknown): Promise<unknown>;
  on(event: 'error', listener: (err: unknown) => void): unknown;
}

/**
 * A Redlock-family library on one Redis with its default settings (10 retries, 200 ms delay,
 * 100 ms jitter) and `BENCH_TTL_MS` as the duration it needs on every call. A shape's `waitMs`
 * does not apply: redlock's wait is its retry count, kept at the default, so its waiters give up
 * after about 2–3 s.
 * @param make builds the library's `Redlock` on the client the harness created (so on this
 *   process's single ioredis copy)
 * @returns the `create` of a `LockLibrary`
 * @example
 * create: redlockAdapter((client) => new Redlock([client]))
 */
export function redlockAdapter(
  make: (client: Redis) => RedlockLike,
): (url: string) => Promise<LockAdapter> {
  return async (url) => {
    const client = new Redis(url);
    await client.ping();
    const redlock = make(client);
    // Redlock emits every "resource locked" vote as an 'error' event; unhandled, it would throw.
    redlock.on('error', () => undefined);
    return {
      acquire: (key: string): Promise<HeldLock> => redlock.acquire([key], BENCH_TTL_MS),
      release: async (lock: HeldLock) => {
        await redlock.release(lock);
      },
      close: async () => {
        await client.quit();
      },
    };
  };
}
