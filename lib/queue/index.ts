export { QueueService } from './queue.service';
export { QueueWorker } from './queue-worker.decorator';
export { MAX_QUEUE_BATCH } from './queue.constants';
export type {
  Task,
  LeasedTask,
  DeadTask,
  QueueStats,
  QueueTaskId,
  NackResult,
} from './interfaces/task.interface';
export type {
  EnqueueOptions,
  ClaimOptions,
  NackOptions,
  QueueWorkerOptions,
  QueueHandler,
  QueueWorkerHandle,
} from './interfaces/queue-options.interface';
export type { QueueSchedule, QueueScheduleOptions } from './schedule/schedule.interface';
