import { RedisLockError } from './redis-lock.error';

/**
 * A semaphore is in use (permits held or callers waiting) with another `limit` than the one a
 * call gave. The limit is stored with the semaphore while it is in use; it changes when the
 * semaphore is idle (see docs/semaphore.md).
 */
export class SemaphoreLimitError extends RedisLockError {
  /**
   * @param key the semaphore key
   * @param limit the limit the call gave
   * @param storedLimit the limit the semaphore is in use with
   */
  constructor(
    readonly key: string,
    readonly limit: number,
    readonly storedLimit: number,
  ) {
    super(
      `semaphore '${key}' is in use with limit ${storedLimit}; this call gave limit ${limit} ` +
        '(a limit changes only while no permit is held and nobody waits)',
    );
  }
}
