import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Injectable } from '@nestjs/common';
import { SampleRedis } from '../redis/sample-redis';
import type { Order } from './flash-sale.dto';
import { SaleChangedError } from './flash-sale.errors';
import { saleKeys } from './flash-sale-keys';

const script = (name: string) => readFileSync(join(__dirname, 'scripts', `${name}.lua`), 'utf8');

/** The sample client with the scripts defined on it (KEYS sale, buyers, orders, holds, released). */
interface WithSaleScripts {
  takeUnits(...keysThenArgs: Array<string | number>): Promise<0 | 1>;
  releaseUnits(...keysThenIds: string[]): Promise<number>;
}

/**
 * Takes units of a sale from its stock and puts them back, each atomically and at most once per
 * batch or order, however often the call reaches Redis (ioredis sends a command again after a
 * failover when the old master's connection closed before the reply):
 *
 * - `take-units.lua`: the buyers' records, the orders, the holds and the stock and sold counts of a
 *   batch, if the sale's `seq` is still the one it was numbered from;
 * - `release-units.lua`: the order's record, its buyer's record and its hold go, the stock and the
 *   sold count move by one, the order is listed as released. Used for an order the full queue
 *   refused, and by `SaleSettler` for an order `order_outcomes` says is released.
 */
@Injectable()
export class SaleUnits {
  constructor(private readonly redis: SampleRedis) {
    redis.client.defineCommand('takeUnits', { numberOfKeys: 5, lua: script('take-units') });
    redis.client.defineCommand('releaseUnits', { numberOfKeys: 5, lua: script('release-units') });
  }

  /**
   * Takes one unit of the sale of `sku` for each of `orders`, numbered from the sale's `seq`
   * `seqBefore` (read under the stock lock).
   * @throws SaleChangedError when the sale's `seq` moved meanwhile (the stock lock was lost):
   *   nothing is taken
   * @example
   * await units.take('phone', 6, [order7, order8]);
   */
  async take(sku: string, seqBefore: number, orders: readonly Order[]): Promise<void> {
    const args = orders.flatMap((o) => [
      o.orderId,
      o.userId,
      Date.parse(o.boughtAt),
      JSON.stringify(o),
    ]);
    try {
      await this.scripts.takeUnits(...this.keys(sku), seqBefore, ...args);
    } catch (err) {
      if (err instanceof Error && err.message.startsWith('SALE_CHANGED')) {
        throw new SaleChangedError(sku, err.message);
      }
      throw err;
    }
  }

  /**
   * Releases the units of `orderIds` of the sale of `sku`.
   * @returns how many went back to the stock now (an order released already counts 0)
   * @example
   * await units.release('phone', ['phone-7']);
   */
  async release(sku: string, orderIds: readonly string[]): Promise<number> {
    if (orderIds.length === 0) return 0;
    return this.scripts.releaseUnits(...this.keys(sku), ...orderIds);
  }

  private get scripts(): WithSaleScripts {
    return this.redis.client as unknown as WithSaleScripts;
  }

  private keys(sku: string): string[] {
    const k = saleKeys(this.redis.prefix, sku);
    return [k.sale, k.buyers, k.orders, k.holds, k.released];
  }
}
