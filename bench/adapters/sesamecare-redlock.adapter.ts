import { Redis } from 'ioredis';
import { Redlock, type Lock } from '@sesamecare-oss/redlock';
import { BENCH_TTL_MS, type HeldLock, type LockAdapter } from './lock-adapter';

/**
 * `@sesamecare-oss/redlock` (maintained fork of redlock 5) on one Redis, default settings
 * (10 retries, 200 ms delay, 100 ms jitter).
 */
export class SesamecareRedlockAdapter implements LockAdapter {
  private constructor(
    private readonly client: Redis,
    private readonly redlock: Redlock,
  ) {}

  /** @param url the bench Redis */
  static async create(url: string): Promise<SesamecareRedlockAdapter> {
    const client = new Redis(url);
    await client.ping();
    const redlock = new Redlock([client]);
    // Like redlock, it emits every "resource locked" vote as an 'error' event.
    redlock.on('error', () => undefined);
    return new SesamecareRedlockAdapter(client, redlock);
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
