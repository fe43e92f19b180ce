export {
  RedisLockQueueAdapter,
  type RedisLockQueueAdapterOptions,
} from './redis-lock-queue.adapter';
export { BullBoardActionError } from './bull-board-action.error';
