import { Redis } from 'ioredis';
import { Semaphore } from 'redis-semaphore';
import { SemaphoreService } from '../../lib';
import { packageVersion } from '../support/package-version';
import { BENCH_WAIT_MS, type LockAdapter, type LockLibrary } from './lock-adapter';
import { oursApp } from './ours-app';

/** The semaphore shape's limit: at most this many holders of the key at once. */
export const SEMAPHORE_LIMIT = 5;

/** Ours: `SemaphoreService`, one permit per acquisition, `waitMs` as the lock rows get. */
class OursSemaphoreAdapter implements LockAdapter {
  private constructor(
    private readonly close_: () => Promise<void>,
    private readonly semaphores: SemaphoreService,
  ) {}

  static async create(url: string): Promise<OursSemaphoreAdapter> {
    const app = await oursApp({ redis: url });
    return new OursSemaphoreAdapter(() => app.close(), app.get(SemaphoreService));
  }

  acquire(key: string): Promise<unknown> {
    return this.semaphores.acquire(key, { limit: SEMAPHORE_LIMIT, waitMs: BENCH_WAIT_MS });
  }

  async release(permit: unknown): Promise<void> {
    await (permit as { release(): Promise<boolean> }).release();
  }

  close(): Promise<void> {
    return this.close_();
  }
}

/**
 * `redis-semaphore`'s `Semaphore`, default options (lockTimeout 10 s, acquireTimeout 10 s, polls
 * every 10 ms). One `Semaphore` object per acquisition, as its README shows.
 */
class RedisSemaphoreSemaphoreAdapter implements LockAdapter {
  private constructor(private readonly client: Redis) {}

  static async create(url: string): Promise<RedisSemaphoreSemaphoreAdapter> {
    const client = new Redis(url);
    await client.ping();
    return new RedisSemaphoreSemaphoreAdapter(client);
  }

  async acquire(key: string): Promise<unknown> {
    const semaphore = new Semaphore(this.client, key, SEMAPHORE_LIMIT);
    await semaphore.acquire();
    return semaphore;
  }

  async release(semaphore: unknown): Promise<void> {
    await (semaphore as Semaphore).release();
  }

  async close(): Promise<void> {
    await this.client.quit();
  }
}

/** The rows of the semaphore table, ours first (rotated each round like the lock rows). */
export const SEMAPHORE_LIBRARIES: readonly LockLibrary[] = [
  {
    id: 'ours-semaphore',
    label: 'nestjs-redis-lock SemaphoreService',
    ours: true,
    create: (url) => OursSemaphoreAdapter.create(url),
  },
  {
    id: 'redis-semaphore-semaphore',
    label: `redis-semaphore ${packageVersion('redis-semaphore')} Semaphore`,
    ours: false,
    create: (url) => RedisSemaphoreSemaphoreAdapter.create(url),
  },
];

/** The semaphore library with this id; throws for an unknown id. */
export function semaphoreLibrary(id: string): LockLibrary {
  const found = SEMAPHORE_LIBRARIES.find((l) => l.id === id);
  if (!found) throw new Error(`unknown semaphore library '${id}'`);
  return found;
}
