import { RedisLockError } from './redis-lock.error';
import { describeValue } from './describe-value';
import { isSecretOption, REDACTED, redactCredentials } from '../redaction/redact-credentials';

/**
 * An option (module option or per-call option) has an invalid value. `value` is the value given,
 * without its credentials (a URL's password, a `password` key's string, the value of an option
 * named as a credential: `***`).
 */
export class RedisLockOptionsError extends RedisLockError {
  readonly value: unknown;

  constructor(
    readonly option: string,
    value: unknown,
    readonly expected: string,
  ) {
    // A string (or number: a numeric password) under a credential's name is one, even where the
    // option is unknown (a password given one level too high): it is not shown.
    const redacted =
      isSecretOption(option) &&
      (typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint') &&
      value !== ''
        ? REDACTED
        : redactCredentials(value);
    super(`invalid option '${option}': expected ${expected}, got ${describeValue(redacted)}`);
    this.value = redacted;
  }
}
