import { QueueError } from './queue.error';

/**
 * `waitForReplicas` on a queue write (`enqueue`, `ack`): fewer replicas than asked acknowledged it
 * within `timeoutMs` (Redis `WAIT`), so the write is on the master but **may be lost on
 * failover**; or the master has fewer connected replicas than asked, and an enqueue was not sent
 * (`sent: false`) while an ack was sent without waiting (`sent: true`, `timeoutMs` 0: refused, its
 * task would only run again). Retrying an enqueue is safe (ids are deduplicated).
 */
export class QueueReplicationError extends QueueError {
  constructor(
    readonly queue: string,
    /** `'enqueue'` or `'ack'`. */
    readonly operation: string,
    readonly acknowledged: number,
    readonly required: number,
    readonly timeoutMs: number,
    /** Whether the write reached the master (false: refused before it was sent). */
    readonly sent: boolean,
  ) {
    super(
      !sent
        ? `queue '${queue}': ${operation} not sent: the Redis master has ${acknowledged} connected ` +
            `replica(s) and waitForReplicas asks for ${required}`
        : timeoutMs === 0
          ? `queue '${queue}': ${operation} sent without waiting: the Redis master has ` +
            `${acknowledged} connected replica(s) and waitForReplicas asks for ${required}; it is ` +
            'on the master but may be lost on failover'
          : `queue '${queue}': ${operation} was acknowledged by ${acknowledged} of ${required} ` +
            `required replicas within ${timeoutMs} ms; it is on the master but may be lost on failover`,
    );
  }
}
