import { throwError } from 'rxjs';
import { LockKeyError } from '../errors/lock-key.error';
import type { LockService } from '../lock/lock.service';
import type { Permit } from '../semaphore/permit';
import { resolveSemaphoreOptions, type WithPermitOptions } from '../semaphore/semaphore-options';
import type { SemaphoreService } from '../semaphore/semaphore.service';
import { moduleServiceOf } from './lock-service.registry';
import { heldCall, runLockedStream, type HoldGrant } from './locked-stream';
import { decoratedMethod, rejectSignalOption, replaceMethod } from './method-wrapper';
import { compileSingleKey, type LockKeyFunction } from './with-lock-key';
import { isObservableType, VALIDATION_BASE } from './with-lock.decorator';
/** @internal The SemaphoreService of each running module, by the LockService beside it. */
export const semaphoreServices = new WeakMap<LockService, SemaphoreService>();

/** Options of `@WithSemaphore`: `limit` and, unset, the module's defaults for the rest. */
export type WithSemaphoreOptions = Omit<WithPermitOptions, 'signal'>;

/**
 * Runs the method while holding permits of a semaphore whose key is built from its arguments
 * (through `SemaphoreService.withPermit`: auto-extended, always released). `key` follows the
 * rules of `@WithLock` (template `'provider:<0>'`, `<N.a.b>`, or a function of the arguments),
 * but names one semaphore. Templates and options are checked when the class is defined; at call
 * time a missing value throws `LockKeyError` before any permit is taken. Contention rejects with
 * `SemaphoreTimeoutError` (a `LockTimeoutError`: `423 Locked` over HTTP with `LockInterceptor`).
 * An Observable result keeps the permits until it completes, errors or is unsubscribed; other
 * decorators keep working above or below it; the `SemaphoreService` is found like `@WithLock`'s
 * `LockService`.
 * @param key template or `(...args) => string`
 * @param options `limit` (required), `permits` (default 1), `ttlMs`, `waitMs`, `autoExtend`
 * @example
 * ```ts
 * @Post(':provider/charge')
 * @WithSemaphore('provider:<0>', { limit: 5, waitMs: 2000 })
 * async charge(@Param('provider') provider: string, @Body() dto: ChargeDto) { … }
 * ```
 */
export function WithSemaphore(
  key: string | LockKeyFunction,
  options: WithSemaphoreOptions,
): MethodDecorator {
  rejectSignalOption('@WithSemaphore', 'SemaphoreService.withPermit', options);
  resolveSemaphoreOptions(VALIDATION_BASE, options);
  const frozen = Object.freeze({ ...options });
  if (Array.isArray(key)) {
    throw new LockKeyError('@WithSemaphore takes one key template, not an array', key);
  }
  return <T>(
    target: object,
    propertyKey: string | symbol,
    descriptor: TypedPropertyDescriptor<T>,
  ): TypedPropertyDescriptor<T> => {
    const method = decoratedMethod('@WithSemaphore', target, propertyKey, descriptor);
    const { original, where } = method;
    const nameOf = compileSingleKey(
      key,
      '@WithSemaphore',
      'a semaphore',
      method,
      target,
      propertyKey,
    );
    const holder = (self: unknown, args: unknown[]): HoldGrant<Permit> => {
      const name = nameOf(self, args);
      const semaphores = moduleServiceOf(
        semaphoreServices,
        '@WithSemaphore',
        'SemaphoreService',
        where,
        self,
      );
      return (fn, signal) =>
        semaphores.withPermit(name, fn, signal ? { ...frozen, signal } : frozen);
    };
    const run = (self: unknown, args: unknown[]) => () => original.apply(self, args);
    const wrapper = isObservableType(Reflect.getMetadata('design:returntype', target, propertyKey))
      ? function (this: unknown, ...args: unknown[]) {
          let hold: HoldGrant<Permit>;
          try {
            hold = holder(this, args);
          } catch (err) {
            return throwError(() => err);
          }
          return runLockedStream(hold as HoldGrant<unknown>, run(this, args));
        }
      : async function (this: unknown, ...args: unknown[]) {
          return heldCall(holder(this, args), where, run(this, args));
        };
    return replaceMethod(target, propertyKey, descriptor, original, wrapper);
  };
}
