import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import { FlashSaleService } from './flash-sale.service';

/**
 * Answers 410 for a sold-out sale before the handler takes the stock lock: once the units are
 * gone, thousands of late buyers are refused with one read each instead of queueing for the
 * lock (guards run before the handler, so a refused request never touches the lock). The
 * decision that counts is still made under the lock.
 */
@Injectable()
export class SoldOutGuard implements CanActivate {
  constructor(private readonly sales: FlashSaleService) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const sku = context.switchToHttp().getRequest<{ params: Record<string, unknown> }>().params.sku;
    if (typeof sku === 'string') await this.sales.refuseIfSoldOut(sku);
    return true;
  }
}
