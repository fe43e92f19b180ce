import { Redis } from 'ioredis';
import Redlock, { type Lock } from 'redlock';
import { BENCH_TTL_MS, type HeldLock, type LockAdapter } from './lock-adapter';

/**
 * `redlock` 5 (beta) on one Redis, default settings (10 retries, 200 ms delay, 100 ms jitter).
 */
export class RedlockAdapter implements LockAdapter {
  private constructor(
    private readonly client: Redis,
    private readonly redlock: Redlock,
  ) {}

  /** @param url the bench Redis */
  static async create(url: string): Promise<RedlockAdapter> {
    const client = new Redis(url);
    await client.ping();
    // Passing our client keeps every library on this process's single ioredis copy.
    const redlock = new Redlock([client as never]);
    // redlock emits every "resource locked" vote as an 'error' event; unhandled, it would throw.
    redlock.on('error', () => undefined);
    return new RedlockAdapter(client, redlock);
  }

  acquire(key: string): Promise<HeldLock> {
    return this.redlock.acquire([key], BENCH_TTL_MS);
  }

  async release(lock: HeldLock): Promise<void> {
    await this.redlock.release(lock as Lock);
  }

  async close(): Promise<void> {
    await this.client.quit();
  }
}
