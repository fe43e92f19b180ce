import { UnrecoverableTaskError } from './unrecoverable-task.error';

/**
 * A worker with named handlers claimed a task whose name (or lack of one) has no handler on this
 * instance, nor on any live worker of the queue (the workers registry; a task another worker runs
 * is given back for it instead): the task ends dead at once with this error, without running
 * (requeue it with `requeueDead` once a handler for the name is deployed).
 */
export class UnknownTaskNameError extends UnrecoverableTaskError {
  constructor(
    readonly queue: string,
    readonly taskId: string,
    /** The task's name; `undefined` for a task enqueued without one. */
    readonly taskName: string | undefined,
    /** The names this worker has handlers for. */
    readonly known: readonly string[],
  ) {
    super(
      `queue '${queue}': task '${taskId}' ${
        taskName === undefined ? 'has no name' : `is named '${taskName}'`
      } and this worker has no handler for it (its handlers: ${known.map((n) => `'${n}'`).join(', ')})`,
    );
  }
}
