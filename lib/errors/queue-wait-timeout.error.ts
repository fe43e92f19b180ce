import { QueueError } from './queue.error';

/** `QueueService.waitFor` gave up: the task had not finished within `timeoutMs`. */
export class QueueWaitTimeoutError extends QueueError {
  constructor(
    readonly queue: string,
    readonly taskId: string,
    readonly timeoutMs: number,
  ) {
    super(`queue '${queue}': task '${taskId}' did not finish within ${timeoutMs} ms`);
  }
}
