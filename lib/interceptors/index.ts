export {
  LockInterceptor,
  type LockedResponseBody,
  type MissingKeyValueResponseBody,
  type InvalidKeyValueResponseBody,
  type RedisUnavailableResponseBody,
  type QueueFullResponseBody,
  type RateLimitedResponseBody,
  type PayloadTooLargeResponseBody,
  type PassRequiredResponseBody,
} from './lock.interceptor';
