// Type tests that hold under "strict": true only (run by test/types/types.spec.ts): with
// strictFunctionTypes, parameters are checked contravariantly, so a handler cannot ask for more
// than its queue's payload type promises. (`nest new`'s tsconfig leaves strictFunctionTypes off:
// there TypeScript compares parameters both ways, and only a payload type unrelated to the
// queue's is refused; test/types/cases/queue-worker.ts.) Nothing here runs.
import { Injectable } from '@nestjs/common';
import { defineQueue, QueueService, QueueWorker, type RunningTask } from 'nestjs-redis-lock';

interface Order {
  id: string;
  sku: string;
}

const ORDERS = defineQueue<Order>('orders');

@Injectable()
export class StrictHandlers {
  // @ts-expect-error the handler asks for more than the queue's payload type promises
  @QueueWorker(ORDERS)
  async narrowerPayload(task: RunningTask<Order & { coupon: string }>): Promise<void> {
    void task;
  }

  // @ts-expect-error a batch handler too
  @QueueWorker(ORDERS, { batch: { size: 10 } })
  async narrowerBatch(tasks: RunningTask<Order & { coupon: string }>[]): Promise<void> {
    void tasks;
  }
}

export function narrowerProcess(queues: QueueService): void {
  // @ts-expect-error process() checks its handler the same way
  queues.process(ORDERS, async (task: RunningTask<Order & { coupon: string }>) => task.id);
}
