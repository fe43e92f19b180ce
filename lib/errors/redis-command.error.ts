import { RedisLockError } from './redis-lock.error';

/** Redis answered a command of this library with an error (e.g. `WRONGTYPE` on a foreign key). */
export class RedisCommandError extends RedisLockError {
  constructor(
    readonly operation: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`Redis ${operation} failed: ${detail}`, options);
  }
}
