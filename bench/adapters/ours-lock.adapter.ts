import type { INestApplicationContext } from '@nestjs/common';
import { type Lock, LockService } from '../../lib';
import { BENCH_WAIT_MS, type HeldLock, type LockAdapter } from './lock-adapter';
import { oursApp } from './ours-app';

/**
 * nestjs-redis-lock through its public API only: a Nest application context with
 * `RedisLockModule.forRoot`, then `LockService.acquire` and `Lock.release`. Default options except
 * `waitMs` (ours tries once by default) and, for the second row, `fair`.
 */
export class OursLockAdapter implements LockAdapter {
  private constructor(
    private readonly app: INestApplicationContext,
    private readonly locks: LockService,
  ) {}

  /**
   * @param url the bench Redis
   * @param fair `true` (the default of the library) or `false`
   */
  static async create(url: string, fair: boolean): Promise<OursLockAdapter> {
    const app = await oursApp({ redis: url, waitMs: BENCH_WAIT_MS, fair });
    return new OursLockAdapter(app, app.get(LockService));
  }

  acquire(key: string, waitMs?: number): Promise<HeldLock> {
    return this.locks.acquire(key, waitMs === undefined ? undefined : { waitMs });
  }

  async release(lock: HeldLock): Promise<void> {
    await (lock as Lock).release();
  }

  close(): Promise<void> {
    return this.app.close();
  }
}
