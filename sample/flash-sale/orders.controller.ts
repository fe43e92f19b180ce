import { Controller, Get, Param, Query } from '@nestjs/common';
import { ParsePipe } from '../common/parse.pipe';
import { parseOrderId, parseWaitMs, type OrderView } from './flash-sale.dto';
import { FlashSaleService } from './flash-sale.service';

/**
 * Following an order over HTTP (the `orderUrl` of a `202` buy):
 * - `GET /orders/:orderId?waitMs=N` → `{ orderId, sku, userId, price, boughtAt, fence, state,
 *   createdAt }`, `state` `pending` | `created` | `failed`; with `waitMs` (0 to 30,000, default 0)
 *   a pending order is waited for that long. 404 unknown id, 400 malformed id or `waitMs`.
 */
@Controller('orders')
export class OrdersController {
  constructor(private readonly sales: FlashSaleService) {}

  @Get(':orderId')
  order(
    @Param('orderId', new ParsePipe(parseOrderId)) id: { orderId: string; sku: string },
    @Query('waitMs', new ParsePipe(parseWaitMs)) waitMs: number,
  ): Promise<OrderView> {
    return this.sales.order(id.orderId, id.sku, waitMs);
  }
}
