import type {
  JobRetryStatus,
  JobState,
  QueueJob,
  QueueJobJson,
} from '@bull-board/api/dist/types.js';
import type { QueueService } from '../queue/queue.service';
import type { QueueTaskInfo } from '../queue/interfaces/task.interface';
import { BullBoardActionError } from './bull-board-action.error';
import { statusOfState } from './bull-board-states';

/**
 * One `QueueService` task as a bull-board job. Its actions go to the service: `remove` is
 * `remove(queue, id)`, `retry` of a failed (dead) job is `requeueDead(queue, [id])`; `promote` is
 * refused (see the adapter's `promoteAll`).
 */
export class BullBoardJob implements QueueJob {
  /** What bull-board shows as options: delay, priority, group. */
  readonly opts: { delay?: number; priority?: number; group?: { id: string } };

  constructor(
    private readonly queues: QueueService,
    private readonly task: QueueTaskInfo,
    private readonly paused: boolean,
  ) {
    const delay =
      task.state === 'delayed' && task.enqueuedAt !== undefined
        ? task.time - task.enqueuedAt
        : undefined;
    this.opts = {
      ...(delay !== undefined && { delay }),
      ...(task.priority !== undefined && { priority: task.priority }),
      ...(task.group !== undefined && { group: { id: task.group } }),
    };
  }

  /** Its bull-board status when it was read. */
  async getState(): Promise<JobState> {
    return statusOfState(this.task.state, this.paused);
  }

  /** The job as bull-board formats it: id and name = task id, data = payload. */
  toJSON(): QueueJobJson {
    const t = this.task;
    return {
      id: t.id,
      // Tasks have no name; the id is what identifies them in the list.
      name: t.id,
      data: t.payload,
      progress: 0,
      attemptsMade: t.attempts,
      timestamp: t.enqueuedAt ?? t.time,
      finishedOn: t.state === 'dead' ? t.time : null,
      processedOn: null,
      ...(this.opts.delay !== undefined && { delay: this.opts.delay }),
      ...(t.priority !== undefined && { priority: t.priority }),
      failedReason: t.lastError ?? '',
      stacktrace: null,
      returnvalue: null,
      opts: this.opts,
    };
  }

  /** `remove(queue, id)`; a running (leased) task answers 409. */
  async remove(): Promise<void> {
    if (await this.queues.remove(this.task.queue, this.task.id)) return;
    const now = await this.queues.get(this.task.queue, this.task.id);
    if (now?.state === 'leased') {
      throw new BullBoardActionError('remove', `task '${this.task.id}' is running`, 409);
    }
  }

  /** `requeueDead(queue, [id])`; 409 when it is not dead any more. */
  async retry(state?: JobRetryStatus): Promise<void> {
    if (state === 'completed') {
      throw new BullBoardActionError('retry', 'completed tasks are not kept');
    }
    if ((await this.queues.requeueDead(this.task.queue, [this.task.id])) === 0) {
      throw new BullBoardActionError('retry', `task '${this.task.id}' is not dead any more`, 409);
    }
  }

  /** Answers 405 (see {@link PROMOTE_REFUSED}). */
  async promote(): Promise<void> {
    throw new BullBoardActionError('promote', PROMOTE_REFUSED);
  }
}

/** Why `promote` is refused: with the public API it would not be atomic. */
export const PROMOTE_REFUSED =
  'a delayed task cannot be made due now atomically; enqueue it again with replace: true';
