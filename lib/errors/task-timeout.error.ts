import { QueueError } from './queue.error';

/**
 * A task's attempt ran past its `timeoutMs` (the task's own, else its worker's): its
 * `task.signal` aborted with this error and the attempt failed with it (retried per the task's
 * failure policy).
 */
export class TaskTimeoutError extends QueueError {
  constructor(
    readonly queue: string,
    readonly taskId: string,
    readonly timeoutMs: number,
  ) {
    super(`queue '${queue}': task '${taskId}' ran past its timeout of ${timeoutMs} ms`);
  }
}
