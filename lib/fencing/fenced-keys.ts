import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { checkKeyName } from '../lock/lock-keys';
import { taggedKey } from '../redis/tagged-key';

/**
 * The Redis key of fenced resource `name`: `<prefix>fenced:{<name>}`, a hash of `fence` and
 * `value`. A name that already has a `{tag}` keeps it, so `'{order:42}'` shares the Cluster slot
 * of the lock `'{order:42}'`.
 */
export function fencedRedisKey(prefix: string, name: string): string {
  return taggedKey(prefix, 'fenced', name);
}

/** Throws `LockKeyError` unless `name` is a usable resource name (the rules of lock keys). */
export function checkResourceName(name: unknown): string {
  return checkKeyName(name, 'fenced resource name');
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
