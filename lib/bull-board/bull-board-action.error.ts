import { QueueError } from '../errors/queue.error';

/**
 * A bull-board action that this adapter cannot do on a `QueueService` queue. `statusCode` is what
 * bull-board's error handler answers with (405: the operation does not exist here; 409: not now,
 * e.g. removing a task a worker is running), and the message names the action and the reason.
 */
export class BullBoardActionError extends QueueError {
  /**
   * @param action the bull-board action, e.g. `'promote'`
   * @param reason why it cannot be done
   * @param statusCode the HTTP status bull-board answers with
   */
  constructor(
    readonly action: string,
    reason: string,
    readonly statusCode: 405 | 409 = 405,
  ) {
    super(`bull-board action '${action}' is not available: ${reason}`);
  }
}
