import { Module } from '@nestjs/common';
import { FlashSaleController } from './flash-sale.controller';
import { FlashSaleService } from './flash-sale.service';
import { OrdersWorker } from './orders.worker';
import { SoldOutGuard } from './sold-out.guard';

/** The flash sale: `/flash-sales` endpoints and the `orders` worker. */
@Module({
  controllers: [FlashSaleController],
  providers: [FlashSaleService, OrdersWorker, SoldOutGuard],
})
export class FlashSaleModule {}
