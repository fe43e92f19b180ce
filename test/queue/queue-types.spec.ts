// Type tests: `npm run lint` compiles this file with tsc, so every @ts-expect-error below must be
// an error, and every line without one must compile. The runtime checks only keep jest honest.
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { defineQueue, QueueWorker, type LeasedTask, type QueueService, type Task } from '../../lib';

interface Order {
  sku: string;
  qty: number;
}
const ORDERS = defineQueue<Order>('type-orders');
const NOTES = defineQueue<string | undefined>('type-notes');

/** Never called: only compiled. */
export async function typedCalls(queues: QueueService): Promise<void> {
  await queues.enqueue(ORDERS, 'o1', { payload: { sku: 'a', qty: 1 } });
  // @ts-expect-error a typed queue requires its payload
  await queues.enqueue(ORDERS, 'o2');
  // @ts-expect-error the payload must have the queue's type
  await queues.enqueue(ORDERS, 'o3', { payload: { sku: 'a', qty: '1' } });
  await queues.enqueue(NOTES, 'n1');
  await queues.enqueue(NOTES, 'n2', { payload: 'hi' });
  await queues.enqueue('untyped', 'u1', { payload: 42 });

  const [claimed] = await queues.claim(ORDERS);
  const qty: number = claimed.payload.qty;
  const note = (await queues.claim(NOTES))[0].payload;
  // @ts-expect-error a queue whose tasks may lack a payload says so
  const noteText: string = note;
  const popped: Task<Order>[] = await queues.pop(ORDERS);

  queues.process(ORDERS, async (task) => task.payload.sku.toUpperCase());
  queues.process('untyped', async (task: LeasedTask<Order>) => task.payload.qty);
  // @ts-expect-error the handler's payload type must match the queue's
  queues.process(ORDERS, async (task: LeasedTask<{ sku: number }>) => task.payload.sku);
  void [qty, noteText, popped];
}

@Injectable()
export class TypedWorkers {
  @QueueWorker(ORDERS)
  async orders(task: LeasedTask<Order>): Promise<string> {
    return task.payload.sku;
  }

  @QueueWorker('untyped-orders')
  async untyped(task: LeasedTask<Order>): Promise<number> {
    return task.payload.qty;
  }

  @QueueWorker<Order>('explicit-orders')
  async explicit(task: LeasedTask<Order>): Promise<number> {
    return task.payload.qty;
  }

  // @ts-expect-error a handler of ORDERS cannot declare another payload type
  @QueueWorker(ORDERS)
  async wrong(task: LeasedTask<{ sku: number }>): Promise<number> {
    return task.payload.sku;
  }
}

describe('queue payload types', () => {
  it('compiles (checked by tsc in npm run lint); defineQueue keeps the name', () => {
    expect(ORDERS).toEqual({ name: 'type-orders' });
  });
});
