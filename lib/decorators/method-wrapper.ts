import { RedisLockError } from '../errors/redis-lock.error';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { RATE_LIMITED, WITH_LOCK_METHODS } from './with-lock.constants';

/** @internal The method a decorator is applied to. */
export interface DecoratedMethod {
  /** The method as it is before this decorator. */
  readonly original: (...args: unknown[]) => unknown;
  /** `Class.method`, for messages. */
  readonly where: string;
  readonly className: string;
}

/**
 * @internal Reads the method `decorator` (e.g. `'@WithLock'`) is applied to.
 * @throws RedisLockError when it is not a method, or is a generator
 */
export function decoratedMethod(
  decorator: string,
  target: object,
  propertyKey: string | symbol,
  descriptor: { value?: unknown },
): DecoratedMethod {
  const className =
    typeof target === 'function' ? target.name : (target.constructor?.name ?? 'anonymous');
  const where = `${className}.${String(propertyKey)}`;
  const original = descriptor.value;
  if (typeof original !== 'function') {
    throw new RedisLockError(`${decorator} on ${where}: only methods can be decorated`);
  }
  // A generator's body runs only as it is iterated, after the call returned: a lock, a permit or
  // a check around the call would not cover it.
  if (/^\[object (Async)?GeneratorFunction\]$/.test(Object.prototype.toString.call(original))) {
    throw new RedisLockError(
      `${decorator} on ${where}: a generator method cannot be decorated (its body runs as it ` +
        'is iterated, after the call returned); return an Observable or a Promise instead',
    );
  }
  if (decorator !== '@RateLimit' && (original as { [RATE_LIMITED]?: true })[RATE_LIMITED]) {
    throw new RedisLockError(
      `${decorator} on ${where}: write @RateLimit above ${decorator}, so that the limit is ` +
        'checked before anything is taken (decorators below run first)',
    );
  }
  return { original: original as DecoratedMethod['original'], where, className };
}

/**
 * @internal Puts `wrapper` in the place of `original`: with its metadata (decorators written below
 * have put theirs on the original already; those above put theirs on the wrapper), its `name` and
 * `length`; and lists the method as one that needs the module's `LockService`, so that
 * `WithLockExplorer` binds the instance.
 */
export function replaceMethod<T>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<T>,
  original: DecoratedMethod['original'],
  wrapper: (...args: unknown[]) => unknown,
): TypedPropertyDescriptor<T> {
  for (const k of Reflect.getOwnMetadataKeys(original)) {
    Reflect.defineMetadata(k, Reflect.getOwnMetadata(k, original), wrapper);
  }
  Object.defineProperty(wrapper, 'name', { value: original.name, configurable: true });
  Object.defineProperty(wrapper, 'length', { value: original.length, configurable: true });
  const marked: unknown[] = Reflect.getOwnMetadata(WITH_LOCK_METHODS, target) ?? [];
  Reflect.defineMetadata(WITH_LOCK_METHODS, [...marked, propertyKey], target);
  descriptor.value = wrapper as unknown as T;
  return descriptor;
}

/**
 * Throws `RedisLockOptionsError` when a decorator's options carry a `signal`: options given at
 * decoration time are shared by every call, so no call could have a signal of its own.
 * @param decorator e.g. `@WithLock`
 * @param perCall the service method that takes one, e.g. `LockService.withLock`
 */
export function rejectSignalOption(decorator: string, perCall: string, options: unknown): void {
  if (options !== null && typeof options === 'object' && 'signal' in options) {
    throw new RedisLockOptionsError(
      'signal',
      (options as { signal: unknown }).signal,
      `no signal: ${decorator} has no per-call options (use ${perCall})`,
    );
  }
}
