/** Injection token of the module options after validation and defaults. */
export const REDIS_LOCK_RESOLVED_OPTIONS = Symbol('REDIS_LOCK_RESOLVED_OPTIONS');
