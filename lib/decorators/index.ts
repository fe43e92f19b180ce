export {
  WithLock,
  type KeyedMethodDecorator,
  type KeyFunctionMismatch,
  type WithLockDecoratorOptions,
} from './with-lock.decorator';
export type { LockKeyFunction, WithLockKey } from './with-lock-key';
export { RateLimit } from './rate-limit.decorator';
