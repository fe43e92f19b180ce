import { RedisLockError } from './redis-lock.error';
import { describeValue } from './describe-value';
import { redactCredentials } from '../redaction/redact-credentials';

/**
 * An option (module option or per-call option) has an invalid value. `value` is the value given,
 * without its credentials (a URL's password, a `password` key's string: `***`).
 */
export class RedisLockOptionsError extends RedisLockError {
  readonly value: unknown;

  constructor(
    readonly option: string,
    value: unknown,
    readonly expected: string,
  ) {
    const redacted = redactCredentials(value);
    super(`invalid option '${option}': expected ${expected}, got ${describeValue(redacted)}`);
    this.value = redacted;
  }
}
