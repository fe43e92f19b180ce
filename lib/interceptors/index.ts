export {
  LockInterceptor,
  type LockedResponseBody,
  type MissingKeyValueResponseBody,
  type RedisUnavailableResponseBody,
  type QueueFullResponseBody,
  type PayloadTooLargeResponseBody,
} from './lock.interceptor';
