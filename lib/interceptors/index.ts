export {
  LockInterceptor,
  type LockedResponseBody,
  type MissingKeyValueResponseBody,
  type RedisUnavailableResponseBody,
} from './lock.interceptor';
