/** Injection token of the resolved `RedisLockDashboardOptions`. */
export const DASHBOARD_OPTIONS = Symbol('REDIS_LOCK_DASHBOARD_OPTIONS');
