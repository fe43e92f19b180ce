export { RedisLockError } from './redis-lock.error';
export { LockTimeoutError } from './lock-timeout.error';
export { LockLostError } from './lock-lost.error';
export { LockKeyError } from './lock-key.error';
export { RedisLockOptionsError } from './redis-lock-options.error';
export { RedisCommandError } from './redis-command.error';
export { RedisUnavailableError } from './redis-unavailable.error';
export { QueueError } from './queue.error';
