import { requireId, requireInteger, requireNumber, requireObject } from '../common/validate';

/** Body of `POST /flash-sales`. */
export interface CreateSaleRequest {
  /** The product's id, e.g. `'phone'`. */
  sku: string;
  /** Units for sale (0 to 1,000,000). */
  stock: number;
  /** Unit price (0 to 1,000,000,000). */
  price: number;
}

/** Body of `POST /flash-sales/:sku/buy`. */
export interface BuyRequest {
  /** Who buys; each user gets at most one unit of a sale. */
  userId: string;
}

/** Answer of `GET /flash-sales/:sku` (and of `POST /flash-sales`). */
export interface SaleStatus {
  sku: string;
  /** Units left. */
  stock: number;
  /** Units sold. */
  sold: number;
  /** Orders the `orders` workers have created. */
  orders: number;
  /** Orders sold but still in the queue (`sold - orders`). */
  pending: number;
}

/** A purchase: the answer of a successful buy, and the payload of its `orders` task. */
export interface Order {
  /** `<sku>-<n>` for the n-th unit sold: also the queue task id, so enqueueing it twice adds it once. */
  orderId: string;
  sku: string;
  userId: string;
  price: number;
  /** Fencing token of the stock lock the purchase ran under (grows with every purchase). */
  fence: number;
  /** When the unit was sold (ISO 8601). */
  boughtAt: string;
}

/** Checks a `POST /flash-sales` body (400 with the field's name when it is wrong). */
export function parseCreateSale(body: unknown): CreateSaleRequest {
  const o = requireObject(body, ['sku', 'stock', 'price']);
  return {
    sku: requireId('sku', o.sku),
    stock: requireInteger('stock', o.stock, 0, 1_000_000),
    price: requireNumber('price', o.price, 0, 1_000_000_000),
  };
}

/** Checks a `POST /flash-sales/:sku/buy` body. */
export function parseBuy(body: unknown): BuyRequest {
  const o = requireObject(body, ['userId']);
  return { userId: requireId('userId', o.userId) };
}
