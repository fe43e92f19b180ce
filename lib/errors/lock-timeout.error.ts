import { RedisLockError } from './redis-lock.error';
import { describeList } from './describe-value';

/**
 * A lock could not be acquired within `waitMs`.
 * Over HTTP, the module's `LockInterceptor` turns it into `423 Locked` with `Retry-After`.
 */
export class LockTimeoutError extends RedisLockError {
  /**
   * @param keys the lock keys that were asked for (all of them; the message names the first few)
   * @param waitedMs how long the caller waited, in ms
   * @param holderRemainingMs the current holder's remaining TTL in ms, or `undefined` when unknown
   *   (e.g. the lock was free but other waiters were first in line)
   * @param expectedWaitMs an estimate of how long until a new attempt could succeed: the callers
   *   ahead (this process's and the Redis line's) times the hold time recently seen for this lock
   *   by this process, never above `holderRemainingMs`; `undefined` when nothing is known
   * @param message the message of a subclass (e.g. `SemaphoreTimeoutError`)
   */
  constructor(
    readonly keys: readonly string[],
    readonly waitedMs: number,
    readonly holderRemainingMs: number | undefined,
    readonly expectedWaitMs?: number,
    message?: string,
  ) {
    super(
      message ??
        `lock ${describeList(keys)} not acquired within ${waitedMs} ms; ` +
          (holderRemainingMs !== undefined && holderRemainingMs >= 0
            ? `held by another owner for ${holderRemainingMs} ms more`
            : 'other waiters were first in line'),
    );
  }

  /** The first key asked for (the only one for a single-key lock). */
  get key(): string {
    return this.keys[0];
  }
}
