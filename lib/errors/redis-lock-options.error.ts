import { RedisLockError } from './redis-lock.error';
import { describeValue } from './describe-value';

/** An option (module option or per-call option) has an invalid value. */
export class RedisLockOptionsError extends RedisLockError {
  constructor(
    readonly option: string,
    readonly value: unknown,
    readonly expected: string,
  ) {
    super(`invalid option '${option}': expected ${expected}, got ${describeValue(value)}`);
  }
}
