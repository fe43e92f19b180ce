export {
  RedisLockHealthIndicator,
  type RedisLockHealthOptions,
  type RedisLockHealthResult,
} from './redis-lock.health-indicator';
