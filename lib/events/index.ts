export { RedisLockEvents, type RedisLockListener } from './redis-lock-events';
export type {
  RedisLockEventMap,
  RedisLockEventName,
  TaskEventBase,
  TaskFailedEvent,
  TaskCancelledEvent,
  TaskTimeoutEvent,
  TaskRetriedEvent,
  WorkerErrorEvent,
  LockLostEvent,
  LockTimeoutEvent,
} from './redis-lock-event-map';
