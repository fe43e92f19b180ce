import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { checkKeyName } from '../lock/lock-keys';
import { taggedKey } from '../redis/tagged-key';

/**
 * The Redis key of fenced resource `name`: `<prefix>fenced:{<name>}`, a hash of `fence` and
 * `value` (`encodeKeyName`). A name that already has a `{tag}` keeps it, so `'{order:42}'` shares
 * the Cluster slot of the lock `'{order:42}'`.
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

/** Longest writer token accepted, in characters (a lock token has 43). */
const MAX_TOKEN_LENGTH = 512;

/**
 * The fence and the token of a writer given as a `FencedWriter` (a `Lock`, a `Permit`, or
 * `{ fence, token }`) or as a bare fence (token `''`: the anonymous writer). Throws
 * `RedisLockOptionsError` naming `fence` or `token` when either is unusable.
 */
export function checkWriter(writer: unknown): { fence: number; token: string } {
  if (typeof writer !== 'object' || writer === null)
    return { fence: checkFence(writer), token: '' };
  const { fence, token } = writer as { fence?: unknown; token?: unknown };
  const f = checkFence(fence);
  if (typeof token !== 'string' || token.length === 0 || token.length > MAX_TOKEN_LENGTH) {
    throw new RedisLockOptionsError(
      'token',
      token,
      `a non-empty string of at most ${MAX_TOKEN_LENGTH} characters (lock.token)`,
    );
  }
  return { fence: f, token };
}
