import type { Lock, LockService } from '../../lib';

/**
 * The lock `key` the current call runs under (taken by the handler's `@WithLock`). Running
 * without it is a wiring bug, not a client error, so it throws a plain `Error` (HTTP 500).
 * @param locks the application's `LockService`
 * @param key the lock's name, e.g. `stockLockKey(sku)`
 * @param where `Class.method`, for the message
 * @example
 * const lock = requireLock(this.locks, stockLockKey(sku), 'FlashSaleService.buy');
 */
export function requireLock(locks: LockService, key: string, where: string): Lock {
  const lock = locks.currentLock(key);
  if (!lock) throw new Error(`${where} must run under the lock '${key}' (@WithLock)`);
  return lock;
}
