import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import { FlashSaleService } from './flash-sale.service';

/**
 * Answers 410 for a sold-out sale before the handler takes the stock lock: once the units are
 * gone, thousands of late buyers are refused with one read each instead of queueing for the
 * lock (guards run before the handler, so a refused request never touches the lock). A buyer
 * who bought already passes, to learn their order (409). The decision that counts is still made
 * under the lock.
 */
@Injectable()
export class SoldOutGuard implements CanActivate {
  constructor(private readonly sales: FlashSaleService) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context
      .switchToHttp()
      .getRequest<{ params: Record<string, unknown>; body?: { userId?: unknown } }>();
    const { sku } = request.params;
    const userId = request.body?.userId;
    if (typeof sku === 'string') {
      await this.sales.refuseIfSoldOut(sku, typeof userId === 'string' ? userId : undefined);
    }
    return true;
  }
}

/**
 * Answers 404 for an unknown sale before the handler runs: for the event stream, whose 200 and
 * headers go out as soon as the handler returns.
 */
@Injectable()
export class SaleExistsGuard implements CanActivate {
  constructor(private readonly sales: FlashSaleService) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const sku = context.switchToHttp().getRequest<{ params: Record<string, unknown> }>().params.sku;
    if (typeof sku === 'string') await this.sales.status(sku);
    return true;
  }
}
