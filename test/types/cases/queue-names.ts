// Type tests of typed queues (`defineQueue<P>`) passed to QueueService and @OnQueueEvent (run
// by test/types/types.spec.ts): a `TypedQueue<P>` goes wherever a queue name goes, while
// `enqueue` and `process` still check the payload type: every `@ts-expect-error` line must be an
// error. Nothing here runs.
import { Injectable } from '@nestjs/common';
import {
  defineQueue,
  OnQueueEvent,
  QueueService,
  type LeasedTask,
  type QueueEvent,
  type QueueName,
  type RunningTask,
  type Task,
  type TypedQueue,
} from 'nestjs-redis-lock';
import { RedisLockQueueAdapter } from 'nestjs-redis-lock/bull-board';

interface Order {
  id: string;
  sku: string;
}

const ORDERS = defineQueue<Order>('orders');
const MAYBE = defineQueue<Order | undefined>('maybe');

export async function everywhere(queues: QueueService): Promise<void> {
  await queues.waitFor(ORDERS, 'o-1', { timeoutMs: 1_000 });
  const info = await queues.get(ORDERS, 'o-1');
  const sku: string | undefined = info?.payload.sku;
  await queues.stats(ORDERS);
  await queues.cancel(ORDERS, 'o-1');
  await queues.remove(ORDERS, 'o-1');
  await queues.logs(ORDERS, 'o-1');
  await queues.pause(ORDERS);
  await queues.resume(ORDERS);
  await queues.setMaxSize(ORDERS, 5_000);
  await queues.setGlobalConcurrency(ORDERS, null);
  await queues.drain(ORDERS);
  await queues.requeueDead(ORDERS);
  await queues.dequeue(ORDERS, 'o-1', 0);
  queues.localWorkers(ORDERS);
  void queues.workers(ORDERS);
  queues.events(ORDERS).subscribe((e: QueueEvent) => void e.taskId);
  const [popped] = await queues.pop(ORDERS);
  const [leased] = await queues.claim(ORDERS);
  const [dead] = await queues.deadLetters(ORDERS);
  const skus: string[] = [popped.payload.sku, leased.payload.sku, dead.payload.sku, sku ?? ''];
  void skus;
  new RedisLockQueueAdapter(queues, ORDERS);

  // A typed queue is also a queue of a wider payload type.
  const any: QueueName = ORDERS;
  const wider: TypedQueue<{ sku: string }> = ORDERS;
  void [any, wider];

  await queues.enqueue(ORDERS, 'o-1', { payload: { id: 'o-1', sku: 'phone' }, delayMs: 10 });
  await queues.enqueue(MAYBE, 'o-2');
  await queues.enqueue(MAYBE, 'o-2', { payload: { id: 'o-2', sku: 'phone' } });
  await queues.enqueue('orders', 'o-3', { payload: 'anything' });
  const maybe = (await queues.claim(MAYBE))[0].payload;
  // @ts-expect-error a queue whose tasks may lack a payload says so
  const surely: Order = maybe;
  void surely;
  queues.process(ORDERS, async (task) => task.payload.sku);
  queues.process(ORDERS, async (task: RunningTask<{ sku: string }>) => task.payload.sku);
  queues.process('orders', async (task: LeasedTask<Order>) => task.payload.sku);
  const typedPop: Task<Order>[] = await queues.pop(ORDERS);
  void typedPop;

  // @ts-expect-error the payload of an ORDERS task is an Order
  await queues.enqueue(ORDERS, 'o-4', { payload: { id: 'o-4', sku: 42 } });
  // @ts-expect-error an empty object is not an Order
  await queues.enqueue(ORDERS, 'o-5', { payload: {} });
  // @ts-expect-error ORDERS tasks need a payload
  await queues.enqueue(ORDERS, 'o-6');
  // @ts-expect-error a handler of ORDERS takes Order tasks
  queues.process(ORDERS, async (task: RunningTask<{ to: string }>) => task.payload.to);
  // @ts-expect-error a TypedQueue<Order> is not a queue of another payload type
  const other: TypedQueue<{ to: string }> = ORDERS;
  void other;
}

@Injectable()
export class Listeners {
  @OnQueueEvent(ORDERS, 'progress')
  progress(event: QueueEvent): void {
    void event.progress;
  }

  @OnQueueEvent('orders', ['completed', 'dead'])
  async finished(event: QueueEvent): Promise<void> {
    void event.type;
  }

  // @ts-expect-error an event handler gets a QueueEvent
  @OnQueueEvent(ORDERS, 'completed')
  wrong(event: { type: number }): void {
    void event;
  }
}

// @ts-expect-error not an event type
OnQueueEvent(ORDERS, 'finished');
