import { RedisLockError } from './redis-lock.error';

/**
 * An exclusive lock was asked for inside a shared hold of the same key in the same async call
 * chain (a nested `withLock`/`@WithLock`). Upgrading is refused: two shared holders upgrading at
 * once would each wait for the other to let go of its shared hold, for ever.
 */
export class LockUpgradeError extends RedisLockError {
  constructor(readonly key: string) {
    super(
      `lock '${key}' is held in shared mode by this call chain; taking it exclusively inside would ` +
        'deadlock with another shared holder doing the same: release the shared lock first, or ' +
        'take it exclusively from the start',
    );
  }
}
