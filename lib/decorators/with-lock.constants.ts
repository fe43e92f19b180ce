/** @internal Metadata on a class (prototype or constructor) naming its `@WithLock` methods. */
export const WITH_LOCK_METHODS = Symbol('nestjs-redis-lock:with-lock-methods');

/** @internal Marks the wrappers `@RateLimit` makes, so that `@WithLock` or `@WithSemaphore` applied after one (written above it) is refused. */
export const RATE_LIMITED = Symbol('nestjs-redis-lock:rate-limited');
