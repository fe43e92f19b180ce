import { checkKeyName } from '../lock/lock-keys';
import { taggedKey } from '../redis/tagged-key';
import type { RateLimitAlgorithm } from './rate-limit-options';

/**
 * The one Redis key of rate limit `name` for `algorithm`: `<prefix>rate:{<name>}` (a log) or
 * `<prefix>bucket:{<name>}` (a bucket), so one name may be limited both ways. Names follow the
 * lock keys' rules (the brace rule included, see docs/locks.md); throws `LockKeyError` for an
 * empty or too long name.
 */
export function rateLimitRedisKey(
  prefix: string,
  algorithm: RateLimitAlgorithm,
  name: unknown,
): string {
  const kind = algorithm === 'sliding-window' ? 'rate' : 'bucket';
  return taggedKey(prefix, kind, checkKeyName(name, 'rate limit key'));
}
