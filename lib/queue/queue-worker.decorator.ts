import type {
  BatchOptions,
  QueueBatchHandler,
  QueueHandler,
  QueueWorkerOptions,
} from './interfaces/queue-options.interface';
import type { QueueName } from './interfaces/task.interface';
import { checkQueueName } from './queue-keys';
import { checkWorkerOptions } from './queue-worker-options';
import { QUEUE_WORKER_METADATA } from './queue.constants';

/** One `@QueueWorker` registration, as stored on the method. */
export interface QueueWorkerMetadata {
  queue: string;
  options?: QueueWorkerOptions;
}

/**
 * What `@QueueWorker(...)` returns: a method decorator that accepts a method assignable to
 * `Handler` (`QueueHandler<P>`, or `QueueBatchHandler<P>` for a batch worker), so a method
 * declaring another payload type does not compile.
 * @example
 * // one decorator for every worker of the orders queue
 * export const OrdersWorker: QueueWorkerDecorator<QueueHandler<Order>> = QueueWorker(ORDERS);
 */
export type QueueWorkerDecorator<Handler> = <H extends Handler>(
  target: object,
  key: string | symbol,
  descriptor: TypedPropertyDescriptor<H>,
) => void;

/**
 * Makes a provider (or controller) method the handler of a worker on `queue`, started when the
 * application bootstraps and drained on shutdown, like `QueueService.process`. The method gets
 * the `RunningTask` (a `LeasedTask` with `signal`, `progress`, `log`…) and an `AbortSignal`
 * (a batch worker, `{ batch }`: an array of `RunningTask`); resolving acks the task, throwing
 * retries it with backoff. The decorator only records metadata (checked here: a bad queue name
 * throws `QueueError`, a bad option `RedisLockOptionsError`); several on one method start several
 * workers. With a `TypedQueue<P>` (or `@QueueWorker<P>(name)`), the method must take a
 * `RunningTask<P>` (or a `LeasedTask<P>`): a handler declaring another payload type does not
 * compile.
 * @param queue the queue name, or a `TypedQueue` from `defineQueue`
 * With `name`, the method is the handler of the tasks enqueued with that name, at most its own
 * `concurrency` at a time; the named handlers of a queue share one claim loop (see
 * `QueueWorkerOptions.name`). The module's `queue.workers[queue]` wins over these options.
 * @param options name, concurrency, leaseMs, maxAttempts, backoffMs, drainTimeoutMs,
 * groupConcurrency, limiter, groupLimiter, keepCompleted, keepDead, timeoutMs, backoff, batch
 * (defaults: the module's `queue` options)
 * @example
 * const ORDERS = defineQueue<{ sku: string; userId: string }>('orders');
 * @Injectable()
 * export class OrderWorker {
 *   @QueueWorker(ORDERS, { concurrency: 10, maxAttempts: 3 })
 *   async create(task: RunningTask<{ sku: string; userId: string }>) {
 *     await this.orders.create(task.payload, { signal: task.signal });
 *   }
 *
 *   @QueueWorker('emails', { name: 'welcome', concurrency: 20 })
 *   async welcome(task: RunningTask<{ to: string }>) {
 *     await this.mailer.sendWelcome(task.payload.to);
 *   }
 *
 *   @QueueWorker('audit', { batch: { size: 100 } })
 *   async write(tasks: RunningTask<AuditEntry>[]) {
 *     await this.audit.insertMany(tasks.map((t) => t.payload));
 *   }
 * }
 */
// `any` by default: a plain queue name leaves the handler free to declare its payload type.
export function QueueWorker<P = any>(
  queue: QueueName<P>,
  options: QueueWorkerOptions & { batch: BatchOptions },
): QueueWorkerDecorator<QueueBatchHandler<P>>;
export function QueueWorker<P = any>(
  queue: QueueName<P>,
  options?: QueueWorkerOptions,
): QueueWorkerDecorator<QueueHandler<P>>;
export function QueueWorker(
  queue: QueueName<unknown>,
  options?: QueueWorkerOptions,
): QueueWorkerDecorator<QueueHandler<unknown> | QueueBatchHandler<unknown>> {
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
