/** The queue the purchases hand their orders to. */
export const ORDERS_QUEUE = 'orders';

/**
 * `@WithLock` key template of the stock lock: `stock:` + the handler's first argument, the sku.
 * The one place the lock's name is written; `stockLockKey` fills it in.
 */
export const STOCK_LOCK_TEMPLATE = 'stock:<0>';

/** The lock every stock change of `sku` runs under: `STOCK_LOCK_TEMPLATE` for `sku`. */
export function stockLockKey(sku: string): string {
  // A function replacer, so that nothing in `sku` is read as a `$` pattern.
  return STOCK_LOCK_TEMPLATE.replace('<0>', () => sku);
}

/** Redis keys of one flash sale (one hash tag, so a Cluster keeps them in one slot). */
export interface SaleKeys {
  /**
   * HASH: `stock` (units left), `sold` (units sold), `price`, `seq` (order numbers handed out: it
   * never goes down, so a unit returned to the stock never gives its order id to another buyer).
   */
  sale: string;
  /**
   * HASH: userId → JSON of the `Order` of the unit that user bought, kept so that a retry can
   * enqueue the order again if enqueueing it failed after the sale.
   */
  buyers: string;
  /**
   * HASH: orderId → order JSON of every unit sold and not returned to the stock (whether its row
   * is written yet or not): how `GET /orders/:orderId` tells a pending order from an unknown id.
   */
  orders: string;
  /**
   * ZSET: orderId → when its unit was taken (epoch ms): every unit taken and not settled yet,
   * i.e. neither its row written nor the unit back in stock. `SaleSettler` settles those older
   * than `saleHoldMs`.
   */
  holds: string;
  /** HASH: orderId → order JSON of every unit that went back on sale (`state: 'released'`). */
  released: string;
}

/** The keys of the sale of `sku` under `prefix`. */
export function saleKeys(prefix: string, sku: string): SaleKeys {
  const base = `${prefix}sale:{${sku}}`;
  return {
    sale: base,
    buyers: `${base}:buyers`,
    orders: `${base}:orders`,
    holds: `${base}:holds`,
    released: `${base}:released`,
  };
}

/** SET of the skus of every sale opened under `prefix`: the sales `SaleSettler` looks at. */
export function salesIndexKey(prefix: string): string {
  return `${prefix}sales`;
}

/** The waiting room in front of sale `sku` (when it was created with one). */
export function saleRoom(sku: string): string {
  return `sale:${sku}`;
}
