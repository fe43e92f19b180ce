export {
  LockInterceptor,
  type LockedResponseBody,
  type MissingKeyValueResponseBody,
  type RedisUnavailableResponseBody,
  type QueueFullResponseBody,
} from './lock.interceptor';
