/** Injection token of the resolved `RedisLockDashboardOptions`. */
export const DASHBOARD_OPTIONS = Symbol('REDIS_LOCK_DASHBOARD_OPTIONS');
/** Injection token of the controller class `forRoot` made (its middleware is applied to it). */
export const DASHBOARD_CONTROLLER = Symbol('REDIS_LOCK_DASHBOARD_CONTROLLER');
