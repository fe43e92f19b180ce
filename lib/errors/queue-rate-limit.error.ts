import { QueueError } from './queue.error';

/** Longest pause a `QueueRateLimitError` or `queues.rateLimit` may ask for: one day. */
export const MAX_QUEUE_RATE_LIMIT_MS = 86_400_000;

/**
 * Thrown by a handler when the service it calls answered "too many requests" (a payment
 * provider's 429): the task goes back to the queue without spending its attempt, and the queue
 * takes no task on any instance for `ms` (as `queues.rateLimit(queue, ms)`). Not a failure: no
 * `task.failed` event, no retry counted.
 * @example
 * if (response.status === 429) throw new QueueRateLimitError(Number(response.headers.get('retry-after')) * 1000);
 */
export class QueueRateLimitError extends QueueError {
  /**
   * @param ms how long the queue takes no task: an integer from 1 to 86,400,000 (a day)
   * @throws QueueError (not this class) for another `ms`
   */
  constructor(readonly ms: number) {
    if (!Number.isInteger(ms) || ms < 1 || ms > MAX_QUEUE_RATE_LIMIT_MS) {
      throw QueueError.invalid('ms', ms, `an integer from 1 to ${MAX_QUEUE_RATE_LIMIT_MS}`);
    }
    super(`queue rate limited for ${ms} ms`);
  }
}
