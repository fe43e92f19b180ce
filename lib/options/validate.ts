import { describeValue } from '../errors/describe-value';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';

/** Largest timer delay Node accepts (about 24.8 days); longer values would fire at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Builds the error for an invalid value from the name of the option (or argument), the value and
 * what was expected: `RedisLockOptionsError` for options, `QueueError.invalid` for queue arguments.
 */
export type InvalidValue = (name: string, value: unknown, expected: string) => Error;

/** The default `InvalidValue`: a `RedisLockOptionsError`. */
export const invalidOption: InvalidValue = (name, value, expected) =>
  new RedisLockOptionsError(name, value, expected);

function isIntIn(value: unknown, min: number, max: number): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;
}

/**
 * The UTF-8 length of `text` when it is over `limit` bytes, else `undefined`. Cheap for short
 * text: a UTF-16 unit is at most 3 UTF-8 bytes, so text of at most `limit / 3` units is not
 * counted.
 * @example utf8BytesOver('é'.repeat(257), 512) // 514
 */
export function utf8BytesOver(text: string, limit: number): number | undefined {
  if (text.length * 3 <= limit) return undefined;
  const bytes = Buffer.byteLength(text);
  return bytes > limit ? bytes : undefined;
}

/** A lone UTF-16 surrogate: the string is not well-formed Unicode. */
export const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Why `name` cannot name a key when it holds a lone UTF-16 surrogate (not well-formed Unicode:
 * sent to Redis as UTF-8, each becomes U+FFFD, so two such names would be one key); `undefined`
 * when it is well-formed. `what` names it in the message (`'lock key'`, `"invalid argument 'queue':"`),
 * `at` says where it is (` at index 3`).
 * @example notWellFormed('lock key', 'a\uD800') // "lock key 'a\uD800' is not well-formed …"
 */
export function notWellFormed(what: string, name: string, at = ''): string | undefined {
  if (!LONE_SURROGATE.test(name)) return undefined;
  return (
    `${what} ${describeValue(name)}${at} is not well-formed Unicode (a lone surrogate): Redis would ` +
    'store it as U+FFFD, the same key as other names'
  );
}

/** Throws unless `value` is an integer number of ms in [min, MAX_TIMER_MS]. */
export function checkMs(
  option: string,
  value: unknown,
  min: number,
  invalid: InvalidValue = invalidOption,
): number {
  if (!isIntIn(value, min, MAX_TIMER_MS)) {
    throw invalid(option, value, `an integer number of ms from ${min} to ${MAX_TIMER_MS}`);
  }
  return value;
}

/** Throws unless `value` is an integer in [min, max]. */
export function checkInt(
  option: string,
  value: unknown,
  min: number,
  max: number,
  invalid: InvalidValue = invalidOption,
): number {
  if (!isIntIn(value, min, max)) throw invalid(option, value, `an integer from ${min} to ${max}`);
  return value;
}

/** Throws unless `value` is one of `allowed`. */
export function checkOneOf<T extends string>(
  option: string,
  value: unknown,
  allowed: readonly T[],
  invalid: InvalidValue = invalidOption,
): T {
  if (!allowed.includes(value as T)) {
    throw invalid(option, value, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`);
  }
  return value as T;
}

export function checkBoolean(option: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new RedisLockOptionsError(option, value, 'true or false');
  return value;
}

/**
 * Throws unless `value` is a string of at most 256 bytes whose first `{`, if any, opens a complete,
 * non-empty hash tag (`'{app}:'`, `'{shop}:{eu}:'`). Redis Cluster hashes a key by its first `{`
 * and the next `}`: a prefix whose first `{` is not closed in it (`'app{'`) or opens an empty tag
 * (`'app{}:'`) would hash each of a lock's keys by another part of it, or whole, and its scripts
 * would fail with CROSSSLOT. What follows that first tag does not change the hash.
 */
export function checkPrefix(option: string, value: unknown): string {
  if (typeof value !== 'string' || Buffer.byteLength(value) > 256) {
    throw new RedisLockOptionsError(option, value, 'a string of at most 256 bytes');
  }
  if (!/^[^{]*(\{[^}]+\}.*)?$/s.test(value)) {
    throw new RedisLockOptionsError(
      option,
      value,
      "no '{' but in a complete, non-empty hash tag (e.g. '{app}:')",
    );
  }
  return value;
}

/**
 * Throws unless `value` is `undefined` or a plain object whose keys are all in `known`; returns
 * it (`{}` for `undefined`). An unknown key is named `option.key` (or just `key` at top level).
 */
export function checkKnownKeys(
  option: string,
  value: unknown,
  known: readonly string[],
  invalid: InvalidValue = invalidOption,
): Record<string, unknown> {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalid(option, value, 'an object');
  }
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw invalid(
        option ? `${option}.${key}` : key,
        (value as Record<string, unknown>)[key],
        `a known option (one of ${known.join(', ')})`,
      );
    }
  }
  return value as Record<string, unknown>;
}
