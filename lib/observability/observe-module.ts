import type { RedisLockEvents } from '../events/redis-lock-events';
import type { QueueService } from '../queue/queue.service';
import { observeQueues, recordQueueMetrics } from './metrics';
import { queueBacklog } from './queue-backlog';

/**
 * Starts the module's instruments (see docs/observability.md): the queue counters from the task
 * events of `events`, and the gauges of the queues with workers here. Does nothing without
 * `@opentelemetry/api` or an SDK. Returns the function that stops both.
 */
export function observeModule(events: RedisLockEvents, queues: QueueService): () => void {
  const stopEvents = recordQueueMetrics(events);
  const stopGauges = observeQueues({
    workerQueues: () => queues.workerQueues(),
    backlog: (queue) => queueBacklog(queues, queue),
  });
  return () => {
    stopEvents();
    stopGauges();
  };
}
