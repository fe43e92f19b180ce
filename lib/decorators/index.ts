export { WithLock, type WithLockDecoratorOptions } from './with-lock.decorator';
export type {
  KeyedMethodDecorator,
  KeyFunctionMismatch,
  LockKeyFunction,
  WithLockKey,
} from './with-lock-key';
export { RateLimit } from './rate-limit.decorator';
