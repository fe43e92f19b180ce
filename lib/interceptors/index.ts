export {
  LockInterceptor,
  type LockedResponseBody,
  type MissingKeyValueResponseBody,
  type RedisUnavailableResponseBody,
  type QueueFullResponseBody,
  type RateLimitedResponseBody,
} from './lock.interceptor';
