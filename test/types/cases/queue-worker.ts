// Type tests of @QueueWorker's handlers (run by test/types/types.spec.ts): the handler gets a
// `RunningTask` (an array of them for a batch worker), and with a `TypedQueue<P>` (or
// `@QueueWorker<P>(name)`) a handler declaring another payload type does not compile: every
// `@ts-expect-error` line must be an error. Nothing here runs.
import { Injectable } from '@nestjs/common';
import {
  defineQueue,
  QueueWorker,
  type LeasedTask,
  type QueueBatchHandler,
  type QueueHandler,
  type QueueWorkerDecorator,
  type RunningTask,
} from 'nestjs-redis-lock';

interface Order {
  id: string;
  sku: string;
}
interface Email {
  to: string;
}

const ORDERS = defineQueue<Order>('orders');

@Injectable()
export class Handlers {
  // A plain name: the handler declares the payload type it expects.
  @QueueWorker('orders', { concurrency: 10, maxAttempts: 5 })
  async running(task: RunningTask<Order>): Promise<{ orderId: string }> {
    await task.progress({ step: 'charging' });
    task.signal.throwIfAborted();
    return { orderId: task.id };
  }

  @QueueWorker('orders')
  async leased(task: LeasedTask<Order>, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    void task.fence;
  }

  @QueueWorker('orders')
  untyped(task: RunningTask): string {
    return task.id;
  }

  @QueueWorker('orders')
  async noParameters(): Promise<void> {}

  // A typed queue: the payload type is the queue's, or wider.
  @QueueWorker(ORDERS)
  async typed(task: RunningTask<Order>): Promise<string> {
    return task.payload.sku;
  }

  @QueueWorker(ORDERS, { timeoutMs: 1_000 })
  async wider(task: LeasedTask<{ sku: string }>): Promise<string> {
    return task.payload.sku;
  }

  @QueueWorker<Order>('orders')
  async explicit(task: RunningTask<Order>): Promise<void> {
    await task.update({ ...task.payload, sku: 'phone' });
  }

  // A batch worker gets an array.
  @QueueWorker('orders', { batch: { size: 100, maxWaitMs: 50 } })
  async batch(tasks: RunningTask<Order>[]): Promise<{ orderId: string }[]> {
    return tasks.map((t) => ({ orderId: t.id }));
  }

  @QueueWorker(ORDERS, { concurrency: 2, batch: { size: 10 } })
  async typedBatch(tasks: LeasedTask<Order>[]): Promise<void> {
    void tasks.length;
  }

  // Several workers on one method, and composed with another decorator.
  @QueueWorker('orders')
  @QueueWorker(ORDERS)
  @Reflect.metadata('role', 'worker')
  async twice(task: RunningTask<Order>): Promise<void> {
    void task;
  }

  // @ts-expect-error the queue's tasks carry an Order, not an Email
  @QueueWorker(ORDERS)
  async wrongPayload(task: RunningTask<Email>): Promise<void> {
    void task;
  }

  // @ts-expect-error @QueueWorker<Order>: the handler must take Order tasks
  @QueueWorker<Order>('orders')
  async wrongExplicit(task: LeasedTask<Email>): Promise<void> {
    void task;
  }

  // @ts-expect-error a batch worker's handler gets an array of tasks
  @QueueWorker('orders', { batch: { size: 10 } })
  async notAnArray(task: RunningTask<Order>): Promise<void> {
    void task;
  }

  // @ts-expect-error a worker without `batch` gets one task, not an array
  @QueueWorker('orders')
  async anArray(tasks: RunningTask<Order>[]): Promise<void> {
    void tasks;
  }

  // @ts-expect-error a batch of Orders, not of Emails
  @QueueWorker(ORDERS, { batch: { size: 10 } })
  async wrongBatchPayload(tasks: RunningTask<Email>[]): Promise<void> {
    void tasks;
  }

  // @ts-expect-error the second argument is the task's AbortSignal
  @QueueWorker('orders')
  async wrongSecond(task: RunningTask<Order>, retries: number): Promise<void> {
    void task;
    void retries;
  }
}

// The decorator's type is public: a helper that wraps it keeps the handler check.
export const orderWorker: QueueWorkerDecorator<QueueHandler<Order>> = QueueWorker(ORDERS);
export const orderBatches: QueueWorkerDecorator<QueueBatchHandler<Order>> = QueueWorker(ORDERS, {
  batch: { size: 5 },
});

// @ts-expect-error a queue name is a string or a TypedQueue
QueueWorker(42);
// @ts-expect-error `batch` takes a size
QueueWorker('orders', { batch: {} });
