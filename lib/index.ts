export { RedisLockModule } from './redis-lock.module';
export { OPTIONS_TYPE, ASYNC_OPTIONS_TYPE } from './redis-lock.module-definition';
export type {
  RedisLockModuleOptions,
  RedisConnectionOption,
  EvictionPolicyMode,
  RedisClusterConnectionOptions,
  QueueDefaults,
  QueueOwnOptions,
  QueueWorkersConfig,
  NamedHandlerConfig,
  RetryLogLevel,
} from './interfaces/redis-lock-module-options.interface';
export type {
  BatchLockOptions,
  LockOptions,
  WaitForReplicasOptions,
  WithLockOptions,
} from './interfaces/lock-options.interface';
export { LockService } from './lock/lock.service';
export { Lock } from './lock/lock';
export type { LockBatchFn } from './lock/lock-batches';
export type { LockInspection, LockLineEntry } from './lock/lock-inspection';
export * from './queue';
export * from './events';
export * from './decorators';
export * from './interceptors';
export * from './fencing';
export * from './schedule';
export * from './errors';
export { SemaphoreService } from './semaphore/semaphore.service';
export { RateLimiterService } from './rate-limit/rate-limiter.service';
export type {
  RateLimitAlgorithm,
  RateLimitOptions,
  RateLimitResult,
} from './rate-limit/rate-limit-options';
export { WaitingRoomService } from './waiting-room/waiting-room.service';
export type {
  WaitingRoomOptions,
  WaitingRoomStatus,
  WaitingRoomWaitOptions,
} from './waiting-room/waiting-room-options';
export { RequiresPass } from './decorators/requires-pass.decorator';
export { Permit } from './semaphore/permit';
export type { SemaphoreOptions, WithPermitOptions } from './semaphore/semaphore-options';
export { WithSemaphore, type WithSemaphoreOptions } from './decorators/with-semaphore.decorator';
export * from './observability/health';
export * from './dashboard';
export { createRedisLock, type RedisLock } from './standalone/create-redis-lock';
