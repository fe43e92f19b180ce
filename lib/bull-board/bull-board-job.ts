import type {
  JobRetryStatus,
  JobState,
  QueueJob,
  QueueJobJson,
} from '@bull-board/api/dist/types.js';
import type { QueueService } from '../queue/queue.service';
import type { QueueTaskInfo, QueueTaskState } from '../queue/interfaces/task.interface';
import { TASK_EXPIRED } from '../queue/task-errors';
import { BullBoardActionError } from './bull-board-action.error';
import { statusOfState } from './bull-board-states';

/**
 * One `QueueService` task as a bull-board job. Its actions go to the service: `remove` is
 * `remove(queue, id)`; `retry` of a dead job is `requeueDead(queue, [id])`, of a cancelled one
 * `enqueue` of its id again (name, payload, priority and group kept); retry of a completed job,
 * `promote` and `updateData` are refused (see {@link COMPLETED_RETRY_REFUSED},
 * {@link PROMOTE_REFUSED}, {@link UPDATE_DATA_REFUSED}).
 */
export class BullBoardJob implements QueueJob {
  /** What bull-board shows as options: delay, priority, group. */
  readonly opts: { delay?: number; priority?: number; group?: { id: string } };
  /** The task id (bull-board's flow view reads it, as it does of a BullMQ job). */
  readonly id: string;

  /**
   * @param queueQualifiedName its adapter's `getQueueQualifiedName()`: bull-board's flow view
   *   finds the adapter of a job by it, and then sees that tasks have no flows
   */
  constructor(
    private readonly queues: QueueService,
    private readonly task: QueueTaskInfo,
    private readonly paused: boolean,
    readonly queueQualifiedName: string,
  ) {
    this.id = task.id;
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

  /**
   * The job as bull-board formats it: id = task id, name = the task's name (else its id), data = payload, progress = the last
   * `task.progress()` value, returnvalue = a completed task's result, finishedOn = when it
   * completed, died or was cancelled; failedReason and stacktrace from its last error (a cancelled
   * task's reason starts with `TaskCancelledError: `). processedOn is not stored: `null`.
   */
  toJSON(): QueueJobJson {
    const t = this.task;
    return {
      id: t.id,
      // A task's name (enqueue's `name`), as a BullMQ job's; else its id, which identifies it.
      name: t.name ?? t.id,
      data: t.payload,
      progress: (t.progress ?? 0) as QueueJobJson['progress'],
      attemptsMade: t.attempts,
      timestamp: t.enqueuedAt ?? t.time,
      finishedOn: finishedAt(t) ?? null,
      processedOn: null,
      ...(this.opts.delay !== undefined && { delay: this.opts.delay }),
      ...(t.priority !== undefined && { priority: t.priority }),
      failedReason: failedReasonOf(t),
      stacktrace: t.error?.stack ? [t.error.stack] : null,
      returnvalue: t.state === 'completed' ? (t.result ?? null) : null,
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

  /**
   * A dead task: `requeueDead(queue, [id])`. A cancelled or expired task: enqueued again under its
   * id with its name (so the worker's handler of that name runs it), payload, priority and group
   * (its own `maxAttempts`, `backoff`, `timeoutMs` and deadline are not kept). 409 when it is in none of these states any more; 405 for a completed
   * task.
   */
  async retry(state?: JobRetryStatus): Promise<void> {
    const { queue, id } = this.task;
    if (state === 'completed' || this.task.state === 'completed') {
      throw new BullBoardActionError('retry', COMPLETED_RETRY_REFUSED);
    }
    const ended = this.task.state;
    if (ended === 'cancelled' || ended === 'expired') {
      const now = await this.queues.get(queue, id);
      if (now?.state === ended) {
        const added = await this.queues.enqueue(queue, id, {
          ...(now.name !== undefined && { name: now.name }),
          ...(now.payload !== undefined && { payload: now.payload }),
          ...(now.priority !== undefined && { priority: now.priority }),
          ...(now.group !== undefined && { group: now.group }),
        });
        if (added === 1) return;
      }
      throw new BullBoardActionError('retry', `task '${id}' is not ${ended} any more`, 409);
    }
    if ((await this.queues.requeueDead(queue, [id])) === 0) {
      throw new BullBoardActionError('retry', `task '${id}' is not dead any more`, 409);
    }
  }

  /** Answers 405 (see {@link PROMOTE_REFUSED}). */
  async promote(): Promise<void> {
    throw new BullBoardActionError('promote', PROMOTE_REFUSED);
  }

  /**
   * bull-board's "Update Data": answers 405 (see {@link UPDATE_DATA_REFUSED}). Without this
   * method bull-board would answer 200 and change nothing.
   */
  async updateData(): Promise<void> {
    throw new BullBoardActionError('update data', UPDATE_DATA_REFUSED);
  }
}

/** When a finished (completed, dead, cancelled, expired) task finished; else `undefined`. */
export function finishedAt(task: QueueTaskInfo): number | undefined {
  if (!FINISHED_STATES.includes(task.state)) return undefined;
  return task.finishedAt ?? task.time;
}

const FINISHED_STATES: readonly QueueTaskState[] = ['completed', 'dead', 'cancelled', 'expired'];

/**
 * bull-board's failedReason: the last error's message, prefixed with the error's name for a
 * cancelled task (`TaskCancelledError: cancelled: <reason>`) so that it reads apart from the
 * dead ones it is listed with; '' when there was none.
 */
function failedReasonOf(task: QueueTaskInfo): string {
  if (task.state === 'expired') return `${TASK_EXPIRED.name}: ${TASK_EXPIRED.message}`;
  if (task.state === 'cancelled') {
    const error = task.error ?? { name: 'TaskCancelledError', message: 'cancelled' };
    return `${error.name}: ${error.message}`;
  }
  return task.error?.message ?? task.lastError ?? '';
}

/** Why `promote` is refused: with the public API it would not be atomic. */
export const PROMOTE_REFUSED =
  'a delayed task cannot be made due now atomically; enqueue it again with replace: true';

/**
 * Why "Update Data" is refused: `QueueService` has no atomic payload update. Enqueueing the task
 * again with `replace: true` would drop its own `maxAttempts`, `backoff`, `timeoutMs` and deadline,
 * could race a worker claiming it, and cannot reach a failed (dead) task.
 */
export const UPDATE_DATA_REFUSED =
  "a task's payload cannot be changed in place; enqueue it again with replace: true";

/** Why retry of a completed job is refused: its id stays taken while its result is kept. */
export const COMPLETED_RETRY_REFUSED =
  'a completed task is kept with its result and its id cannot be enqueued again until keepCompleted drops it; enqueue a new task';
