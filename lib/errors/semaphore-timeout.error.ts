import { LockTimeoutError } from './lock-timeout.error';

/**
 * Permits of a semaphore could not be acquired within `waitMs`. A `LockTimeoutError`, so over HTTP
 * the module's `LockInterceptor` turns it into `423 Locked` with `Retry-After` (until the earliest
 * held permit expires) like a busy lock.
 */
export class SemaphoreTimeoutError extends LockTimeoutError {
  /**
   * @param key the semaphore key
   * @param permits permits asked for
   * @param limit the semaphore's limit
   * @param waitedMs how long the caller waited, in ms
   * @param soonestMs ms until the earliest held permit expires, or `undefined` when unknown
   */
  constructor(
    key: string,
    readonly permits: number,
    readonly limit: number,
    waitedMs: number,
    soonestMs: number | undefined,
  ) {
    super(
      [key],
      waitedMs,
      soonestMs,
      undefined,
      `semaphore '${key}': ${permits} of ${limit} permit${limit === 1 ? '' : 's'} not acquired ` +
        `within ${waitedMs} ms; ` +
        (soonestMs !== undefined && soonestMs >= 0
          ? `the earliest held permit expires in ${soonestMs} ms`
          : 'other waiters were first in line'),
    );
  }
}
