import type { QueueWorkerOptions } from './interfaces/queue-options.interface';
import type { LeasedTask, TypedQueue } from './interfaces/task.interface';
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
 * With a `TypedQueue<P>` (or `@QueueWorker<P>(name)`), the method must take a `LeasedTask<P>`:
 * a handler declaring another payload type does not compile.
 * @param queue the queue name, or a `TypedQueue` from `defineQueue`
 * @param options concurrency, leaseMs, maxAttempts, backoffMs, drainTimeoutMs, groupConcurrency,
 * limiter, groupLimiter, keepCompleted, keepDead (defaults: the module's `queue` options)
 * @example
 * const ORDERS = defineQueue<{ sku: string; userId: string }>('orders');
 * @Injectable()
 * export class OrderWorker {
 *   @QueueWorker(ORDERS, { concurrency: 10, maxAttempts: 3 })
 *   async create(task: LeasedTask<{ sku: string; userId: string }>) {
 *     await this.orders.create(task.payload);
 *   }
 * }
 */
// `any` by default: a plain queue name leaves the handler free to declare its payload type.
export function QueueWorker<P = any>(
  queue: string | TypedQueue<P>,
  options?: QueueWorkerOptions,
): <H extends (task: LeasedTask<P>, signal: AbortSignal) => unknown>(
  target: object,
  key: string | symbol,
  descriptor: TypedPropertyDescriptor<H>,
) => void {
  const name = checkQueueName(typeof queue === 'string' ? queue : queue?.name);
  checkWorkerOptions(options);
  const registration: QueueWorkerMetadata = { queue: name, options: options && { ...options } };
  return (_target, _key, descriptor) => {
    const method = descriptor.value as object;
    const existing = (Reflect.getMetadata(QUEUE_WORKER_METADATA, method) ??
      []) as QueueWorkerMetadata[];
    Reflect.defineMetadata(QUEUE_WORKER_METADATA, [...existing, registration], method);
  };
}
