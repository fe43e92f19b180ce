import {
  Body,
  Controller,
  Get,
  Header,
  HttpCode,
  HttpStatus,
  Param,
  type MessageEvent,
  Post,
  Sse,
  UseGuards,
} from '@nestjs/common';
import type { Observable } from 'rxjs';
import { RateLimit, WithLock } from '../../lib';
import { IdPipe, ParsePipe } from '../common/parse.pipe';
import {
  parseBuy,
  parseCreateSale,
  type BuyAccepted,
  type BuyRequest,
  type CreateSaleRequest,
  type OrderRow,
  type SaleStatus,
} from './flash-sale.dto';
import { FlashSaleService } from './flash-sale.service';
import { SaleEvents } from './sale-events';
import { salePage } from './sale-page';
import { STOCK_LOCK_TEMPLATE } from './flash-sale-keys';
import { SaleExistsGuard, SoldOutGuard } from './sale.guards';

/**
 * The stock lock of a new sale: wait up to 2 s (then 423 Locked). Its TTL is the module's
 * (`redisLockOptionsFactory`), auto-extended while the change runs.
 */
const STOCK_LOCK = { waitMs: 2_000 } as const;

/** Presses of buy per user and sale: 5 in any 10 s (a script or a stuck button, not a buyer). */
const BUY_RATE_LIMIT = { limit: 5, windowMs: 10_000 };

/**
 * The flash sale over HTTP:
 * - `POST /flash-sales` `{ sku, stock, price }` → 201 (409 when the sale exists)
 * - `POST /flash-sales/:sku/buy` `{ userId }` → 202 `{ orderId, orderUrl }` (the order is queued;
 *   follow it at `orderUrl`); 403 the sale has a waiting room and the user holds no pass, 404 no
 *   sale, 409 this user already bought, 410 sold out, 429 over 5 presses in 10 s, 423 the
 *   stock lock could not be had within 2 s, 503 + Retry-After the orders queue is full or Redis is
 *   in trouble
 * - `GET /flash-sales/:sku` → `{ sku, stock, sold, orders, pending }`
 * - `GET /flash-sales/:sku/orders` → the orders written so far (rows)
 * - `GET /flash-sales/:sku/events` → server-sent events: units sold, orders created, live
 * - `GET /flash-sales/:sku/live` → a page showing those events, with a buy form
 */
@Controller('flash-sales')
export class FlashSaleController {
  constructor(
    private readonly sales: FlashSaleService,
    private readonly events: SaleEvents,
  ) {}

  @Post()
  @WithLock(STOCK_LOCK_TEMPLATE, STOCK_LOCK)
  create(
    // The sku on its own, first: the argument the lock's template (`stock:<0>`) names.
    @Body('sku', new IdPipe('sku')) sku: string,
    @Body(new ParsePipe(parseCreateSale)) sale: CreateSaleRequest,
  ): Promise<SaleStatus> {
    return this.sales.create(sale);
  }

  /**
   * Takes the stock lock itself, for a batch of buyers (see `FlashSaleService.buy`). Each user may
   * press buy 5 times in 10 s per sale (then 429 with Retry-After); a sale with a waiting room
   * sells only to buyers holding its pass (403 without).
   */
  @Post(':sku/buy')
  @HttpCode(HttpStatus.ACCEPTED)
  @UseGuards(SoldOutGuard)
  @RateLimit('buy:<0>:<1.userId>', BUY_RATE_LIMIT)
  async buy(
    @Param('sku', new IdPipe('sku')) sku: string,
    @Body(new ParsePipe(parseBuy)) body: BuyRequest,
  ): Promise<BuyAccepted> {
    await this.sales.requirePass(sku, body.userId);
    return this.sales.buy(sku, body.userId);
  }

  @Get(':sku')
  status(@Param('sku', new IdPipe('sku')) sku: string): Promise<SaleStatus> {
    return this.sales.status(sku);
  }

  @Get(':sku/orders')
  orders(@Param('sku', new IdPipe('sku')) sku: string): Promise<OrderRow[]> {
    return this.sales.orders(sku);
  }

  @Get(':sku/live')
  @Header('content-type', 'text/html; charset=utf-8')
  @UseGuards(SaleExistsGuard)
  page(@Param('sku', new IdPipe('sku')) sku: string): string {
    return salePage(sku);
  }

  /** `SaleExistsGuard`: an unknown sale gets a 404 before the stream opens. */
  @Sse(':sku/events')
  @UseGuards(SaleExistsGuard)
  stream(@Param('sku', new IdPipe('sku')) sku: string): Observable<MessageEvent> {
    return this.events.of(sku);
  }
}
