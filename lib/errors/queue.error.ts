import { RedisLockError } from './redis-lock.error';
import { describeValue } from './describe-value';

/** A queue operation got an invalid argument, or a queue operation failed. */
export class QueueError extends RedisLockError {
  /**
   * @param argument the name of the offending argument, when the error is about one
   */
  constructor(
    message: string,
    readonly argument?: string,
  ) {
    super(message);
  }

  /** A `QueueError` for an argument with an invalid value. */
  static invalid(argument: string, value: unknown, expected: string): QueueError {
    return new QueueError(
      `invalid argument '${argument}': expected ${expected}, got ${describeValue(value)}`,
      argument,
    );
  }
}
