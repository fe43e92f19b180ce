export { WithLock, type WithLockDecoratorOptions } from './with-lock.decorator';
export type { WithLockKey } from './with-lock-key';
