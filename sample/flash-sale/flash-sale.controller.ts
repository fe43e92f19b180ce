import {
  Body,
  Controller,
  Get,
  HttpCode,
  HttpStatus,
  Param,
  Post,
  UseGuards,
} from '@nestjs/common';
import { WithLock } from '../../lib';
import { IdPipe, ParsePipe } from '../common/parse.pipe';
import {
  parseBuy,
  parseCreateSale,
  type BuyRequest,
  type CreateSaleRequest,
  type Order,
  type SaleStatus,
} from './flash-sale.dto';
import { FlashSaleService } from './flash-sale.service';
import { STOCK_LOCK_TEMPLATE } from './flash-sale-keys';
import { SoldOutGuard } from './sold-out.guard';

/**
 * The stock lock of a new sale: wait up to 2 s (then 423 Locked). Its TTL is the module's
 * (`redisLockOptionsFactory`), auto-extended while the change runs.
 */
const STOCK_LOCK = { waitMs: 2_000 } as const;

/**
 * The flash sale over HTTP:
 * - `POST /flash-sales` `{ sku, stock, price }` → 201 (409 when the sale exists)
 * - `POST /flash-sales/:sku/buy` `{ userId }` → 202 with the order (queued); 404 no sale,
 *   409 this user already bought, 410 sold out, 423 the stock lock could not be had within 2 s
 * - `GET /flash-sales/:sku` → `{ sku, stock, sold, orders, pending }`
 * - `GET /flash-sales/:sku/orders` → the orders created so far
 */
@Controller('flash-sales')
export class FlashSaleController {
  constructor(private readonly sales: FlashSaleService) {}

  @Post()
  @WithLock(STOCK_LOCK_TEMPLATE, STOCK_LOCK)
  create(
    // The sku on its own, first: the argument the lock's template (`stock:<0>`) names.
    @Body('sku', new IdPipe('sku')) sku: string,
    @Body(new ParsePipe(parseCreateSale)) sale: CreateSaleRequest,
  ): Promise<SaleStatus> {
    return this.sales.create(sale);
  }

  /** Takes the stock lock itself, for a batch of buyers (see `FlashSaleService.buy`). */
  @Post(':sku/buy')
  @HttpCode(HttpStatus.ACCEPTED)
  @UseGuards(SoldOutGuard)
  buy(
    @Param('sku', new IdPipe('sku')) sku: string,
    @Body(new ParsePipe(parseBuy)) body: BuyRequest,
  ): Promise<Order> {
    return this.sales.buy(sku, body.userId);
  }

  @Get(':sku')
  status(@Param('sku', new IdPipe('sku')) sku: string): Promise<SaleStatus> {
    return this.sales.status(sku);
  }

  @Get(':sku/orders')
  orders(@Param('sku', new IdPipe('sku')) sku: string): Promise<Order[]> {
    return this.sales.orders(sku);
  }
}
