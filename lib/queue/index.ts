export { QueueService, defineQueue, type TypedEnqueueOptions } from './queue.service';
export { QueueWorker, type QueueWorkerDecorator } from './queue-worker.decorator';
export { OnQueueEvent } from './on-queue-event.decorator';
export { MAX_QUEUE_BATCH, MAX_FLOW_NODES } from './queue.constants';
export type {
  FlowNode,
  FlowNodeOptions,
  FlowTaskIds,
  EnqueueFlowOptions,
  OnChildFailure,
  ChildFailure,
  TaskChildren,
} from './interfaces/flow.interface';
export type {
  Task,
  LeasedTask,
  DeadTask,
  QueueStats,
  QueueTaskId,
  NackResult,
  QueueTaskInfo,
  QueueTaskState,
  TypedQueue,
  QueueName,
  RunningTask,
  TaskOwnOptions,
  BackoffOptions,
} from './interfaces/task.interface';
export type {
  QueueEvent,
  QueueEventType,
  TaskOutcome,
  TaskError,
  WaitForOptions,
  QueueEventsOptions,
} from './interfaces/queue-event.interface';
export { QUEUE_EVENT_TYPES } from './interfaces/queue-event.interface';
export type {
  EnqueueOptions,
  ClaimOptions,
  NackOptions,
  QueueWorkerOptions,
  QueueHandler,
  QueueWorkerHandle,
  QueueWorkerInfo,
  QueueMetricsOptions,
  QueueMetricsPoint,
  WorkerRateLimit,
  KeepBounds,
  BackoffFunction,
  BatchOptions,
  QueueBatchHandler,
} from './interfaces/queue-options.interface';
export type { QueueSchedule, QueueScheduleOptions } from './schedule/schedule.interface';
