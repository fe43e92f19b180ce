/** The queue the purchases hand their orders to. */
export const ORDERS_QUEUE = 'orders';

/** The lock every stock change of `sku` runs under (the `@WithLock('stock:<0>')` key). */
export function stockLockKey(sku: string): string {
  return `stock:${sku}`;
}

/** Redis keys of one flash sale (one hash tag, so a Cluster keeps them in one slot). */
export interface SaleKeys {
  /** HASH: `stock` (units left), `sold`, `price`. */
  sale: string;
  /** HASH: userId → orderId of the unit that user bought. */
  buyers: string;
  /** HASH: orderId → order JSON, written once by the `orders` worker. */
  orders: string;
}

/** The keys of the sale of `sku` under `prefix`. */
export function saleKeys(prefix: string, sku: string): SaleKeys {
  const base = `${prefix}sale:{${sku}}`;
  return { sale: base, buyers: `${base}:buyers`, orders: `${base}:orders` };
}
