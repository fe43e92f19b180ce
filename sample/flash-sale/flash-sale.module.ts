import { Module } from '@nestjs/common';
import { FlashSaleController } from './flash-sale.controller';
import { FlashSaleService } from './flash-sale.service';
import { OrdersController } from './orders.controller';
import { OrdersRepository } from './orders.repository';
import { OrdersWorker } from './orders.worker';
import { SaleSettler } from './sale-settler';
import { SaleEvents } from './sale-events';
import { SaleExistsGuard, SoldOutGuard } from './sale.guards';
import { UnitReleaser } from './unit-releaser';

/**
 * The flash sale: `/flash-sales` and `/orders` endpoints, the `orders` worker and its table, and
 * the sweeper that settles every unit taken (`SaleSettler`).
 */
@Module({
  controllers: [FlashSaleController, OrdersController],
  providers: [
    FlashSaleService,
    OrdersRepository,
    OrdersWorker,
    SaleEvents,
    SaleExistsGuard,
    SaleSettler,
    SoldOutGuard,
    UnitReleaser,
  ],
})
export class FlashSaleModule {}
