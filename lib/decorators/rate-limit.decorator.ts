import { LockKeyError } from '../errors/lock-key.error';
import { RateLimitedError } from '../errors/rate-limited.error';
import type { LockService } from '../lock/lock.service';
import { resolveRateLimitOptions, type RateLimitOptions } from '../rate-limit/rate-limit-options';
import type { RateLimiterService } from '../rate-limit/rate-limiter.service';
import { checkBeforeCall } from './checked-call';
import { moduleServiceOf } from './lock-service.registry';
import { decoratedMethod, replaceMethod } from './method-wrapper';
import { compileSingleKey, type KeyedMethodDecorator, type LockKeyFunction } from './with-lock-key';
import { RATE_LIMITED } from './with-lock.constants';

/** @internal The RateLimiterService of each running module, by the LockService beside it. */
export const rateLimiterServices = new WeakMap<LockService, RateLimiterService>();

/**
 * Counts each call of the method against a distributed rate limit whose key is built from its
 * arguments (`RateLimiterService.consume`); a call over the limit rejects with `RateLimitedError`
 * before the method runs (`429 Too Many Requests` with `Retry-After` over HTTP with
 * `LockInterceptor`). `key` follows the rules of `@WithLock` (template `'buy:<0>'`, `<N.a.b>`, or a
 * function of the arguments) and names one limit; templates and options are checked when the
 * class is defined. With `@WithLock` or `@WithSemaphore` on the same method, write `@RateLimit`
 * above them: the limit is checked first, so a refused call never waits for the lock (written
 * below them, the class definition throws `RedisLockError` saying so). An Observable result is
 * counted on each subscription.
 * @param key template or `(...args) => string`
 * @param options `limit`, `windowMs`, `algorithm` (`'sliding-window'` by default), `cost`
 * @example
 * ```ts
 * @Post(':sku/buy')
 * @RateLimit('buy:<1.userId>', { limit: 5, windowMs: 10_000 })
 * @WithLock('stock:<0>', { waitMs: 2_000 })
 * async buy(@Param('sku') sku: string, @Body() body: BuyDto) { … }
 * ```
 */
export function RateLimit<A extends unknown[]>(
  key: (...args: A) => string,
  options: RateLimitOptions,
): KeyedMethodDecorator<A>;
export function RateLimit(key: string, options: RateLimitOptions): MethodDecorator;
export function RateLimit(
  key: string | LockKeyFunction,
  options: RateLimitOptions,
): MethodDecorator {
  const limits = Object.freeze(resolveRateLimitOptions(options));
  if (Array.isArray(key)) {
    throw new LockKeyError('@RateLimit takes one key template, not an array', key);
  }
  return <T>(
    target: object,
    propertyKey: string | symbol,
    descriptor: TypedPropertyDescriptor<T>,
  ): TypedPropertyDescriptor<T> => {
    const method = decoratedMethod('@RateLimit', target, propertyKey, descriptor);
    const { original, where } = method;
    const nameOf = compileSingleKey(key, '@RateLimit', 'a rate limit', method, target, propertyKey);
    const check = async (self: unknown, args: unknown[]): Promise<void> => {
      const name = nameOf(self, args);
      const result = await moduleServiceOf(
        rateLimiterServices,
        '@RateLimit',
        'RateLimiterService',
        where,
        self,
      ).consume(name, limits);
      if (!result.allowed) {
        throw new RateLimitedError(name, limits.limit, limits.windowMs, result.retryAfterMs);
      }
    };
    const wrapper = checkBeforeCall(target, propertyKey, original, check);
    Object.defineProperty(wrapper, RATE_LIMITED, { value: true });
    return replaceMethod(target, propertyKey, descriptor, original, wrapper);
  };
}
