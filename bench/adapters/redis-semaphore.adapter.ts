import { Redis } from 'ioredis';
import { Mutex } from 'redis-semaphore';
import type { HeldLock, LockAdapter } from './lock-adapter';

/**
 * `redis-semaphore`'s `Mutex`, default options (lockTimeout 10 s, acquireTimeout 10 s, polls
 * every 10 ms, refreshes at 80 % of lockTimeout). One `Mutex` object per acquisition, as its
 * README shows.
 */
export class RedisSemaphoreAdapter implements LockAdapter {
  private constructor(private readonly client: Redis) {}

  /** @param url the bench Redis */
  static async create(url: string): Promise<RedisSemaphoreAdapter> {
    const client = new Redis(url);
    await client.ping();
    return new RedisSemaphoreAdapter(client);
  }

  async acquire(key: string, waitMs?: number): Promise<HeldLock> {
    const mutex = new Mutex(
      this.client,
      key,
      waitMs === undefined ? undefined : { acquireTimeout: waitMs },
    );
    await mutex.acquire();
    return mutex;
  }

  async release(lock: HeldLock): Promise<void> {
    await (lock as Mutex).release();
  }

  async close(): Promise<void> {
    await this.client.quit();
  }
}
