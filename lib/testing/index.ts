export { RedisLockTestingModule, type RedisLockTestingOptions } from './redis-lock-testing.module';
export { RedisLockTesting, type RunUntilIdleOptions } from './redis-lock-testing';
export { MemoryRedisServer } from './memory/memory-redis-server';
export { MemoryRedis, type MemoryRedisOptions } from './memory/memory-redis';
