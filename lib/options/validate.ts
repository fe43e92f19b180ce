import { RedisLockOptionsError } from '../errors/redis-lock-options.error';

/** Largest timer delay Node accepts (about 24.8 days); longer values would fire at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/** Throws unless `value` is an integer in [min, MAX_TIMER_MS]. */
export function checkMs(option: string, value: unknown, min: number): number {
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < min ||
    value > MAX_TIMER_MS
  ) {
    throw new RedisLockOptionsError(
      option,
      value,
      `an integer number of ms from ${min} to ${MAX_TIMER_MS}`,
    );
  }
  return value;
}

/** Throws unless `value` is an integer in [min, max]. */
export function checkInt(option: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new RedisLockOptionsError(option, value, `an integer from ${min} to ${max}`);
  }
  return value;
}

export function checkBoolean(option: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new RedisLockOptionsError(option, value, 'true or false');
  return value;
}

export function checkPrefix(option: string, value: unknown): string {
  if (typeof value !== 'string' || Buffer.byteLength(value) > 256) {
    throw new RedisLockOptionsError(option, value, 'a string of at most 256 bytes');
  }
  return value;
}

/** Throws unless `value` is a plain object whose keys are all in `known`. */
export function checkKnownKeys(option: string, value: unknown, known: readonly string[]): void {
  if (value === undefined) return;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new RedisLockOptionsError(option, value, 'an object');
  }
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new RedisLockOptionsError(
        option ? `${option}.${key}` : key,
        (value as Record<string, unknown>)[key],
        `a known option (one of ${known.join(', ')})`,
      );
    }
  }
}
