import { Injectable, type MessageEvent } from '@nestjs/common';
import { concat, defer, filter, map, type Observable } from 'rxjs';
import { QueueService, type QueueEvent } from '../../lib';
import { FlashSaleService } from './flash-sale.service';
import { ORDERS_QUEUE } from './flash-sale-keys';

/** What each `orders` queue event means for the sale (the events the stream passes on). */
const MEANING: Partial<Record<QueueEvent['type'], string>> = {
  enqueued: 'sold',
  completed: 'created',
  retrying: 'retrying',
  dead: 'failed',
};

/**
 * The live events of one sale, for `GET /flash-sales/:sku/events` (server-sent events): first a
 * `status` event (`{ sku, stock, sold, orders, pending }`), then, from every instance, `sold` (a
 * unit was sold: its order was enqueued), `created` (its row was written), `retrying` (writing
 * it failed, it will be tried again) and `failed` (given up): each `{ orderId, at }`, `at` in
 * epoch ms. Fed by `QueueService.events('orders')`, one Redis Stream reader per process.
 */
@Injectable()
export class SaleEvents {
  constructor(
    private readonly queues: QueueService,
    private readonly sales: FlashSaleService,
  ) {}

  /** The events of the sale of `sku`, starting with its `status`. */
  of(sku: string): Observable<MessageEvent> {
    const prefix = `${sku}-`;
    const live = this.queues.events(ORDERS_QUEUE).pipe(
      filter(
        (e) =>
          MEANING[e.type] !== undefined &&
          e.taskId !== undefined &&
          e.taskId.startsWith(prefix) &&
          /^\d+$/.test(e.taskId.slice(prefix.length)),
      ),
      map((e) => ({ type: MEANING[e.type]!, data: { orderId: e.taskId!, at: e.at } })),
    );
    const status = defer(() => this.sales.status(sku)).pipe(
      map((data) => ({ type: 'status', data })),
    );
    return concat(status, live);
  }
}
