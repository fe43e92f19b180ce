import { RedisLockError } from './redis-lock.error';

/** A lock key (or a `@WithLock` key template) is invalid: empty, not a string, too long, … */
export class LockKeyError extends RedisLockError {
  constructor(
    message: string,
    readonly key?: unknown,
  ) {
    super(message);
  }
}
