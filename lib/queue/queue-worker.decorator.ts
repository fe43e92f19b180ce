import type { QueueWorkerOptions } from './interfaces/queue-options.interface';
import { checkQueueName } from './queue-keys';
import { checkWorkerOptions } from './queue-worker-options';
import { QUEUE_WORKER_METADATA } from './queue.constants';

/** One `@QueueWorker` registration, as stored on the method. */
export interface QueueWorkerMetadata {
  queue: string;
  options?: QueueWorkerOptions;
}

/**
 * Makes a provider (or controller) method the handler of a worker on `queue`, started when the
 * application bootstraps and drained on shutdown, like `QueueService.process`. The method gets
 * the `LeasedTask` and an `AbortSignal`; resolving acks the task, throwing retries it with
 * backoff. The decorator only records metadata (checked here: a bad queue name throws
 * `QueueError`, a bad option `RedisLockOptionsError`); several on one method start several workers.
 * @param queue the queue name
 * @param options concurrency, leaseMs, maxAttempts, backoffMs, drainTimeoutMs (defaults: the module's `queue` options)
 * @example
 * @Injectable()
 * export class OrderWorker {
 *   @QueueWorker('orders', { concurrency: 10, maxAttempts: 3 })
 *   async create(task: LeasedTask<{ sku: string; userId: string }>) {
 *     await this.orders.create(task.payload!);
 *   }
 * }
 */
export function QueueWorker(queue: string, options?: QueueWorkerOptions): MethodDecorator {
  const name = checkQueueName(queue);
  checkWorkerOptions(options);
  const registration: QueueWorkerMetadata = { queue: name, options: options && { ...options } };
  return (_target, _key, descriptor) => {
    const method = descriptor.value as object;
    const existing = (Reflect.getMetadata(QUEUE_WORKER_METADATA, method) ??
      []) as QueueWorkerMetadata[];
    Reflect.defineMetadata(QUEUE_WORKER_METADATA, [...existing, registration], method);
    return descriptor;
  };
}
