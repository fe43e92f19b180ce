import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { QueueService, type RunningTask } from '../../lib';
import { SampleConfig } from '../config/sample-config';
import type { Order } from './flash-sale.dto';
import { ORDERS_QUEUE } from './flash-sale-keys';
import { OrdersRepository } from './orders.repository';

/**
 * The `orders` worker of every instance: a batch worker, so up to 100 orders leased together are
 * written in one `INSERT` (`OrdersRepository.insert`), each row with its task's lease fence. A
 * batch whose insert fails (the database is down) is retried with backoff — 200 ms doubling,
 * 12 attempts, about 5 minutes in all — and its buyers read `pending` meanwhile. A task whose
 * worker crashed comes back after its lease; its row, if written, stays the only one.
 */
export const ORDERS_WORKER = {
  batch: { size: 100, maxWaitMs: 0 },
  concurrency: 4,
  // Renewed while a batch runs: a crashed instance's tasks come back to the others within 5 s.
  leaseMs: 5_000,
  maxAttempts: 12,
  backoffMs: 200,
} as const;

@Injectable()
export class OrdersWorker implements OnApplicationBootstrap {
  private readonly logger = new Logger('OrdersWorker');

  constructor(
    private readonly queues: QueueService,
    private readonly rows: OrdersRepository,
    private readonly config: SampleConfig,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    // Stored in Redis for every instance: past it, a buyer gets 503 and the unit stays in stock.
    await this.queues.setMaxSize(ORDERS_QUEUE, this.config.ordersMaxSize);
    // `process` (not `@QueueWorker`) because the handler takes a batch; the queue service stops
    // and drains it on shutdown.
    this.queues.process<Order>(ORDERS_QUEUE, (tasks) => this.write(tasks), ORDERS_WORKER);
  }

  /** Writes the rows of a batch of `orders` tasks. */
  async write(tasks: RunningTask<Order>[]): Promise<void> {
    const rows: Array<{ order: Order; fence: number }> = [];
    for (const task of tasks) {
      if (task.payload) rows.push({ order: task.payload, fence: task.fence });
      else task.fail(new Error(`orders task ${task.id} has no payload`));
    }
    const written = await this.rows.insert(rows);
    if (written.length < rows.length) {
      this.logger.log(`${rows.length - written.length} of ${rows.length} rows existed already`);
    }
  }
}
