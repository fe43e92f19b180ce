import { LockKeyError } from '../errors/lock-key.error';
import { LockKeyValueError } from '../errors/lock-key-value.error';
import { describeValue } from '../errors/describe-value';
import { checkLockNames } from '../lock/lock-keys';
import { parseKeyTemplate, renderKeyTemplate, type KeyTemplate } from './key-template';

/**
 * A function of the decorated method's arguments returning the lock key or keys; it is called
 * with the instance as `this`. `A` is its parameter list: `@WithLock` only accepts a method whose
 * leading parameters take those arguments, so a wrong parameter type is a compile error.
 * @example
 * const byOrder: LockKeyFunction<[orderId: string]> = (orderId) => `order:${orderId}`;
 */
export type LockKeyFunction<A extends unknown[] = any[]> = (
  ...args: A
) => string | readonly string[];

/**
 * What `@WithLock(keyFunction)` (and `@RateLimit`, `@RequiresPass` with a function) returns: a
 * method decorator that accepts a method only when the key function can take the method's leading
 * arguments (`A`), so `@WithLock((id: number) => …)` on `pay(id: string)` does not compile (the
 * error names `KeyFunctionMismatch`). It is also a plain `MethodDecorator`, so
 * `applyDecorators(WithLock(fn), …)` compiles, without that check.
 */
export type KeyedMethodDecorator<A extends unknown[]> = (<M>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<M>,
) => [M] extends [(...args: [...A, ...any[]]) => unknown]
  ? TypedPropertyDescriptor<M> | void
  : TypedPropertyDescriptor<KeyFunctionMismatch>) &
  MethodDecorator;

/**
 * The type a compile error of `@WithLock(keyFunction)` (or `@RateLimit`, `@RequiresPass`) names
 * when the key function's parameters do not accept the decorated method's arguments.
 */
export type KeyFunctionMismatch =
  "the key function's parameters do not accept this method's arguments";

/**
 * What `@WithLock` locks: a key template (`'stock:<0>'`), an array of them (all keys or none), or
 * a `LockKeyFunction` of the method's arguments.
 */
export type WithLockKey = string | readonly string[] | LockKeyFunction;

/** Builds the lock names of one call from the instance and the method's arguments. */
export type LockKeyBuilder = (self: unknown, args: readonly unknown[]) => string[];

/**
 * Validates `key` once, when the method is decorated, and returns the builder used on every
 * call. Templates are parsed here; one naming an argument index at or beyond `declaredParams`
 * throws `LockKeyError`. Every message starts with `<decorator> on <where>`.
 */
export function compileLockKey(
  key: WithLockKey,
  where: string,
  declaredParams: number,
  decorator = '@WithLock',
): LockKeyBuilder {
  const on = `${decorator} on ${where}`;
  if (typeof key === 'function') {
    return (self, args) => {
      const names = (key as (...a: unknown[]) => unknown).apply(self, args as unknown[]);
      if (typeof names !== 'string' && !Array.isArray(names)) {
        throw new LockKeyError(
          `${on}: the key function returned ${describeValue(names)}; ` +
            'expected a string or an array of strings',
          names,
        );
      }
      return named(decorator, where, () => checkLockNames(distinct(names)));
    };
  }
  const sources: readonly unknown[] = Array.isArray(key) ? key : [key];
  if (sources.length === 0) {
    throw new LockKeyError(`${on}: the key template list is empty`, key);
  }
  const templates = sources.map((source) =>
    named(decorator, where, () => parseKeyTemplate(source)),
  );
  for (const t of templates) {
    if (sources.indexOf(t.source) !== sources.lastIndexOf(t.source)) {
      throw new LockKeyError(`${on}: key template '${t.source}' is listed twice`, key);
    }
    if (t.maxIndex >= declaredParams) {
      throw new LockKeyError(
        `${on}: key template '${t.source}' names argument ${t.maxIndex}, ` +
          `but the method declares ${declaredParams} parameter${declaredParams === 1 ? '' : 's'}`,
        t.source,
      );
    }
  }
  return (_self, args) =>
    named(decorator, where, () =>
      checkLockNames(distinct(templates.map((t: KeyTemplate) => renderKeyTemplate(t, args)))),
    );
}

/** The same keys once each, in order: a transfer from an account to itself locks it once. */
function distinct(names: unknown): unknown {
  return Array.isArray(names) ? [...new Set(names)] : names;
}

/**
 * Runs `fn`, prefixing the message of a `LockKeyError` with `<decorator> on <where>`
 * (`@WithLock on Class.method`); a missing value names both too.
 */
function named<T>(decorator: string, where: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof LockKeyValueError) throw err.inMethod(where, decorator);
    if (err instanceof LockKeyError) {
      throw new LockKeyError(`${decorator} on ${where}: ${err.message}`, err.key);
    }
    throw err;
  }
}

/**
 * @internal For decorators of one key (`@WithSemaphore`, `@RateLimit`): compiles `key` (one
 * template or a function) for the decorated method (`declaredParams` from its
 * `design:paramtypes` or `length`), and returns the builder of each call's one name, which throws
 * `LockKeyError` when a key function returns another number of keys.
 * @param what what the key names, for messages (`'a semaphore'`)
 */
export function compileSingleKey(
  key: string | LockKeyFunction,
  decorator: string,
  what: string,
  method: { original: (...args: unknown[]) => unknown; where: string },
  target: object,
  propertyKey: string | symbol,
): (self: unknown, args: readonly unknown[]) => string {
  const paramtypes: unknown = Reflect.getMetadata('design:paramtypes', target, propertyKey);
  const declared = Math.max(
    method.original.length,
    Array.isArray(paramtypes) ? paramtypes.length : 0,
  );
  const keys = compileLockKey(key, method.where, declared, decorator);
  return (self, args) => {
    const names = keys(self, args);
    if (names.length !== 1) {
      throw new LockKeyError(
        `${decorator} on ${method.where}: the key function returned ${names.length} keys; ${what} has one`,
        names,
      );
    }
    return names[0];
  };
}
