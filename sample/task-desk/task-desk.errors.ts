import { SampleError } from '../common/sample.error';

/** The editor asks for a task while holding one whose lease still runs (HTTP 409). */
export class EditorBusyError extends SampleError {
  readonly kind = 'conflict';

  constructor(
    readonly editor: string,
    readonly taskId: string,
    leaseLeftMs: number,
  ) {
    super(`editor '${editor}' holds task '${taskId}' for ${leaseLeftMs} ms more; submit it first`, {
      editor,
      taskId,
      leaseExpiresInMs: leaseLeftMs,
    });
  }
}

/** The editor submits but holds no task (HTTP 409). */
export class NoTaskHeldError extends SampleError {
  readonly kind = 'conflict';

  constructor(readonly editor: string) {
    super(`editor '${editor}' holds no task; ask for one with POST /editors/${editor}/next`, {
      editor,
    });
  }
}

/**
 * The editor submits a task whose lease ran out and which went back to the pool (HTTP 410): it
 * may be with another editor now, whose work counts.
 */
export class LeaseLostError extends SampleError {
  readonly kind = 'gone';

  constructor(
    readonly editor: string,
    readonly taskId: string,
  ) {
    super(
      `editor '${editor}' lost task '${taskId}': the lease ran out and the task went back to the pool`,
      { editor, taskId },
    );
  }
}
