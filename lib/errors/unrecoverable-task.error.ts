import { QueueError } from './queue.error';

/**
 * Thrown by a handler: this task can never succeed. It moves to the dead letters at once, with
 * no retry, whatever attempts it has left.
 * @example
 * if (!order) throw new UnrecoverableTaskError(`order ${id} does not exist`);
 */
export class UnrecoverableTaskError extends QueueError {}
