/** @internal Metadata on a class (prototype or constructor) naming its `@WithLock` methods. */
export const WITH_LOCK_METHODS = Symbol('nestjs-redis-lock:with-lock-methods');
