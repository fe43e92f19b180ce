import { Injectable, Logger } from '@nestjs/common';
import { type LeasedTask, QueueWorker } from '../../lib';
import type { Order } from './flash-sale.dto';
import { FlashSaleService } from './flash-sale.service';
import { ORDERS_QUEUE } from './flash-sale-keys';

/**
 * Creates the orders the purchases enqueue. Every app instance runs this worker; a task is leased
 * to one of them at a time, and a task whose worker crashed comes back after its lease. Creating
 * is idempotent (see `FlashSaleService.createOrder`), so a task delivered twice makes one order.
 */
@Injectable()
export class OrdersWorker {
  private readonly logger = new Logger('OrdersWorker');

  constructor(private readonly sales: FlashSaleService) {}

  @QueueWorker(ORDERS_QUEUE, { concurrency: 8, maxAttempts: 5, backoffMs: 200 })
  async create(task: LeasedTask<Order>): Promise<void> {
    if (!task.payload) throw new Error(`orders task ${task.id} has no payload`);
    const created = await this.sales.createOrder(task.payload);
    if (!created) this.logger.log(`order ${task.id} existed already (task delivered again)`);
  }
}
