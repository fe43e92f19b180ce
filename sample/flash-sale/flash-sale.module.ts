import { Module } from '@nestjs/common';
import { FlashSaleController } from './flash-sale.controller';
import { FlashSaleService } from './flash-sale.service';
import { OrdersController } from './orders.controller';
import { OrdersRepository } from './orders.repository';
import { OrdersWorker } from './orders.worker';
import { SaleEvents } from './sale-events';
import { SaleExistsGuard, SoldOutGuard } from './sale.guards';

/** The flash sale: `/flash-sales` and `/orders` endpoints, the `orders` worker and its table. */
@Module({
  controllers: [FlashSaleController, OrdersController],
  providers: [
    FlashSaleService,
    OrdersRepository,
    OrdersWorker,
    SaleEvents,
    SaleExistsGuard,
    SoldOutGuard,
  ],
})
export class FlashSaleModule {}
