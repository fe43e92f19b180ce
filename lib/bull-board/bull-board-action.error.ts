import { QueueError } from '../errors/queue.error';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';

/**
 * A bull-board action that this adapter cannot do on a `QueueService` queue, or that it refused.
 * `statusCode` is what bull-board's error handler answers with: 400, the board sent a bad argument
 * (a status the action has no counterpart for, an option `add` does not take, a value the queue
 * refuses; `argument` then names it and `cause` holds the queue's own error); 405, the operation
 * does not exist here; 409, not now (e.g. removing a task a worker is running). The message names
 * the action and the reason.
 */
export class BullBoardActionError extends QueueError {
  /**
   * @param action the bull-board action, e.g. `'promote'`
   * @param reason why it cannot be done
   * @param statusCode the HTTP status bull-board answers with
   * @param details `argument`: the argument a 400 is about; `cause`: the error it comes from
   */
  constructor(
    readonly action: string,
    reason: string,
    readonly statusCode: 400 | 405 | 409 = 405,
    details: { argument?: string; cause?: unknown } = {},
  ) {
    super(
      statusCode === 400
        ? `bull-board action '${action}' was refused: ${reason}`
        : `bull-board action '${action}' is not available: ${reason}`,
      details.argument,
    );
    if ('cause' in details) this.cause = details.cause;
  }

  /**
   * `error` as a 400 of `action` when it is an argument error of the queue (a `QueueError` that
   * names its argument, such as a bad offset, delay, priority or name, or a payload past
   * `maxPayloadBytes`; a `RedisLockOptionsError`), so that bull-board answers `400` with its
   * message; any other error (Redis unavailable, a full queue, …) as it is.
   * @param action the bull-board action, e.g. `'add'`
   * @param error what the queue threw
   */
  static fromQueueError(action: string, error: unknown): unknown {
    if (error instanceof BullBoardActionError) return error;
    if (error instanceof QueueError && error.argument !== undefined) {
      return new BullBoardActionError(action, error.message, 400, {
        argument: error.argument,
        cause: error,
      });
    }
    if (error instanceof RedisLockOptionsError) {
      return new BullBoardActionError(action, error.message, 400, {
        argument: error.option,
        cause: error,
      });
    }
    return error;
  }
}
