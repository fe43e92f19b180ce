import { QueueError } from './queue.error';

/**
 * `enqueue` was refused: the queue holds `maxSize` tasks (queued and running) already, or the call
 * would take it past that (`QueueService.setMaxSize`, module option `queue.maxSize`). Nothing of
 * the call was added. `LockInterceptor` answers it `503 Service Unavailable` with `Retry-After`.
 */
export class QueueFullError extends QueueError {
  constructor(
    readonly queue: string,
    /** Tasks queued and running when the call was refused. */
    readonly size: number,
    readonly maxSize: number,
  ) {
    super(
      `queue '${queue}' is full: ${size} tasks queued or running, the limit is ${maxSize}; try again later`,
    );
  }
}
