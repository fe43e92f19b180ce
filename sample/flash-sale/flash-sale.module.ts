import { Module } from '@nestjs/common';
import { FlashSaleController } from './flash-sale.controller';
import { FlashSaleService } from './flash-sale.service';
import { OrdersController } from './orders.controller';
import { OrdersRepository } from './orders.repository';
import { OrdersWorker } from './orders.worker';
import { SaleSettler } from './sale-settler';
import { SaleEvents } from './sale-events';
import { SaleExistsGuard, SoldOutGuard } from './sale.guards';
import { SaleUnits } from './sale-units';
import { WaitingRoomController } from './waiting-room.controller';

/**
 * The flash sale: `/flash-sales` and `/orders` endpoints, the waiting room's page and events, the `orders` worker and its table, and
 * the sweeper that settles every unit taken (`SaleSettler`).
 */
@Module({
  controllers: [FlashSaleController, OrdersController, WaitingRoomController],
  providers: [
    FlashSaleService,
    OrdersRepository,
    OrdersWorker,
    SaleEvents,
    SaleExistsGuard,
    SaleSettler,
    SoldOutGuard,
    SaleUnits,
  ],
})
export class FlashSaleModule {}
