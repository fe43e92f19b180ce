import { describeValue } from '../errors/describe-value';
import { LockKeyError } from '../errors/lock-key.error';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { hasHashTag, MAX_KEY_BYTES } from '../lock/lock-keys';

/**
 * The Redis key of fenced resource `name`: `<prefix>fenced:{<name>}`, a hash of `fence` and
 * `value`. A name that already has a `{tag}` keeps it, so `'{order:42}'` shares the Cluster slot
 * of the lock `'{order:42}'`.
 */
export function fencedRedisKey(prefix: string, name: string): string {
  return `${prefix}fenced:${hasHashTag(name) ? name : `{${name}}`}`;
}

/** Throws `LockKeyError` unless `name` is a usable resource name (a non-empty string ≤ 512 bytes). */
export function checkResourceName(name: unknown): string {
  if (typeof name !== 'string') {
    throw new LockKeyError(
      `fenced resource name must be a string, got ${describeValue(name)}`,
      name,
    );
  }
  if (name.length === 0) throw new LockKeyError('fenced resource name must not be empty', name);
  const bytes = Buffer.byteLength(name);
  if (bytes > MAX_KEY_BYTES) {
    throw new LockKeyError(
      `fenced resource name ${describeValue(name)} is ${bytes} bytes long; the limit is ${MAX_KEY_BYTES}`,
      name,
    );
  }
  return name;
}

/**
 * Throws `RedisLockOptionsError` unless `fence` is a positive safe integer, as `lock.fence` is
 * when the lock was taken with fencing on (`0` means fencing was off: nothing to compare).
 */
export function checkFence(fence: unknown): number {
  if (typeof fence !== 'number' || !Number.isSafeInteger(fence) || fence < 1) {
    throw new RedisLockOptionsError(
      'fence',
      fence,
      'a positive safe integer (lock.fence of a lock taken with fencing on)',
    );
  }
  return fence;
}
