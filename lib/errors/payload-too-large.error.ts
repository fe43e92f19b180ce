import { QueueError } from './queue.error';

/**
 * A value the queue would store is larger than its bound, and nothing of the call was written:
 * a payload (`enqueue`, `enqueueFlow`, `schedule`, `task.update`), a progress value
 * (`task.progress`) or a log line (`task.log`) past `maxPayloadBytes` (module option
 * `queue.maxPayloadBytes`, or the queue's own under `queue.queues`), or a result given to `ack`
 * past `queue.maxResultBytes`. Sizes are UTF-8 bytes of the JSON text that would be stored.
 * @example
 * try { await queues.enqueue('orders', id, { payload }); }
 * catch (e) { if (e instanceof PayloadTooLargeError) log(e.bytes, e.limit, e.option); }
 */
export class PayloadTooLargeError extends QueueError {
  constructor(
    readonly queue: string,
    /** What was refused: `'payload'`, `'progress'`, `'line'` or `'result'`. */
    argument: string,
    /** Its size: UTF-8 bytes of its JSON text. */
    readonly bytes: number,
    /** The bound it passed, in bytes. */
    readonly limit: number,
    /** The option that sets the bound, e.g. `queue.maxPayloadBytes`. */
    readonly option: string,
    /** Whose value it is, e.g. `task 'order-42'` (for the message). */
    subject?: string,
  ) {
    super(
      `queue '${queue}': ${argument}${subject ? ` of ${subject}` : ''} is ${bytes} bytes ` +
        `(UTF-8 JSON); the limit is ${limit} bytes (${option})`,
      argument,
    );
  }
}
