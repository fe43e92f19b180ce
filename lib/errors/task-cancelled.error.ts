import { QueueError } from './queue.error';

/** The reason a running task's `task.signal` aborted when `QueueService.cancel` stopped it. */
export class TaskCancelledError extends QueueError {
  constructor(
    readonly queue: string,
    readonly taskId: string,
    readonly reason?: string,
  ) {
    super(`queue '${queue}': task '${taskId}' was cancelled${reason ? `: ${reason}` : ''}`);
  }
}
