import { RedisLockError } from './redis-lock.error';
import { describeList } from './describe-value';

/**
 * A lock this process held is gone: its TTL ran out before it was extended, or another owner
 * holds the key now. It is the `reason` of `lock.signal` when the signal aborts.
 */
export class LockLostError extends RedisLockError {
  constructor(
    readonly keys: readonly string[],
    readonly detail: string,
  ) {
    super(`lock ${describeList(keys)} was lost: ${detail}`);
  }
}
