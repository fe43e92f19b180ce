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
import { SoldOutGuard } from './sold-out.guard';

/**
 * The stock lock of every sale change: buyers wait up to 2 s in a first-come-first-served line
 * (then 423 Locked); the lock lives 5 s unless the purchase is still running (auto-extended).
 */
const STOCK_LOCK = { waitMs: 2_000, ttlMs: 5_000 } as const;

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
  @WithLock('stock:<0.sku>', STOCK_LOCK)
  create(@Body(new ParsePipe(parseCreateSale)) sale: CreateSaleRequest): Promise<SaleStatus> {
    return this.sales.create(sale);
  }

  @Post(':sku/buy')
  @HttpCode(HttpStatus.ACCEPTED)
  @UseGuards(SoldOutGuard)
  @WithLock('stock:<0>', STOCK_LOCK)
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
