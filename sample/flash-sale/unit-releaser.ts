import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Injectable } from '@nestjs/common';
import { SampleRedis } from '../redis/sample-redis';
import { saleKeys } from './flash-sale-keys';

/** `release-units.lua`: KEYS sale, buyers, orders, holds, released; ARGV the order ids. */
const RELEASE_UNITS_LUA = readFileSync(join(__dirname, 'scripts', 'release-units.lua'), 'utf8');

/** The sample client with the script defined on it. */
interface WithReleaseUnits {
  releaseUnits(...keysThenIds: string[]): Promise<number>;
}

/**
 * Puts units of a sale back on sale, atomically and at most once per order (`release-units.lua`:
 * the order's record, its buyer's record and its hold go, the stock and the sold count move by
 * one, the order is listed as released). Used for an order the full queue refused, and by
 * `SaleSettler` for an order `order_outcomes` says is released.
 */
@Injectable()
export class UnitReleaser {
  constructor(private readonly redis: SampleRedis) {
    redis.client.defineCommand('releaseUnits', { numberOfKeys: 5, lua: RELEASE_UNITS_LUA });
  }

  /**
   * Releases the units of `orderIds` of the sale of `sku`.
   * @returns how many went back to the stock now (an order released already counts 0)
   * @example
   * await releaser.release('phone', ['phone-7']);
   */
  async release(sku: string, orderIds: readonly string[]): Promise<number> {
    if (orderIds.length === 0) return 0;
    const k = saleKeys(this.redis.prefix, sku);
    const client = this.redis.client as unknown as WithReleaseUnits;
    return client.releaseUnits(k.sale, k.buyers, k.orders, k.holds, k.released, ...orderIds);
  }
}
