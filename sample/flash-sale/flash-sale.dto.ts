import { InvalidInputError } from '../common/sample.error';
import { requireId, requireInteger, requireNumber, requireObject } from '../common/validate';

/** Body of `POST /flash-sales`. */
export interface CreateSaleRequest {
  /** The product's id, e.g. `'phone'`. */
  sku: string;
  /** Units for sale (0 to 1,000,000). */
  stock: number;
  /** Unit price (0 to 1,000,000,000). */
  price: number;
  /**
   * A waiting room in front of the sale: buyers are let in first come first served at
   * `admitPerSecond` (`GET /flash-sales/:sku/wait?userId=`), and `buy` needs their pass (403
   * without). Without it, anyone may buy at once.
   */
  waitingRoom?: SaleWaitingRoom;
}

/** The waiting room of a sale (`WaitingRoomService.open`'s options). */
export interface SaleWaitingRoom {
  /** Buyers let in per second (0 to 100,000; 0 holds the line). */
  admitPerSecond: number;
  /** How long a buyer's pass lets it buy, in ms (1,000 to 3,600,000). */
  passTtlMs: number;
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

/** A purchase: the payload of its `orders` task, and what the buyers record keeps of it. */
export interface Order {
  /** `<sku>-<n>` for the n-th unit sold: also the queue task id, so enqueueing it twice adds it once. */
  orderId: string;
  sku: string;
  userId: string;
  price: number;
  /** When the unit was sold, under the stock lock (ISO 8601). */
  boughtAt: string;
}

/** Answer of a successful `POST /flash-sales/:sku/buy` (202): where to follow the order. */
export interface BuyAccepted {
  orderId: string;
  /** `/orders/<orderId>`: `GET` it (with `?waitMs=` to wait) to learn when the order is created. */
  orderUrl: string;
}

/** A row of the `orders` table: a created order. */
export interface OrderRow extends Order {
  /** Fencing token of the `orders` task lease that wrote the row. */
  fence: number;
  /** When the row was written (ISO 8601). */
  createdAt: string;
}

/**
 * Where an order is: queued or not settled yet (`pending`), written to the database (`created`),
 * given up on (`failed`: dead task), or never confirmed and its unit back on sale (`released`).
 */
export type OrderState = 'pending' | 'created' | 'failed' | 'released';

/** Answer of `GET /orders/:orderId`. */
export interface OrderView extends Order {
  state: OrderState;
  /** The row's fence once `created`, else `null`. */
  fence: number | null;
  /** When the row was written once `created`, else `null`. */
  createdAt: string | null;
}

/** Longest wait `GET /orders/:orderId?waitMs=` takes, in ms. */
export const MAX_ORDER_WAIT_MS = 30_000;

/** Checks a `POST /flash-sales` body (400 with the field's name when it is wrong). */
export function parseCreateSale(body: unknown): CreateSaleRequest {
  const o = requireObject(body, ['sku', 'stock', 'price', 'waitingRoom']);
  const sale: CreateSaleRequest = {
    sku: requireId('sku', o.sku),
    stock: requireInteger('stock', o.stock, 0, 1_000_000),
    price: requireNumber('price', o.price, 0, 1_000_000_000),
  };
  if (o.waitingRoom !== undefined)
    sale.waitingRoom = parseSaleWaitingRoom(o.waitingRoom, 'waitingRoom.');
  return sale;
}

/** Checks a sale's waiting room settings (`waitingRoom` of a new sale, `PUT …/waiting-room`). */
export function parseSaleWaitingRoom(body: unknown, field = ''): SaleWaitingRoom {
  const room = requireObject(body, ['admitPerSecond', 'passTtlMs']);
  return {
    admitPerSecond: requireNumber(`${field}admitPerSecond`, room.admitPerSecond, 0, 100_000),
    passTtlMs: requireInteger(`${field}passTtlMs`, room.passTtlMs, 1_000, 3_600_000),
  };
}

/** A `userId` query parameter (the waiting room's page and events). */
export function parseUserId(value: unknown): string {
  return requireId('userId', value);
}

/** Checks a `POST /flash-sales/:sku/buy` body. */
export function parseBuy(body: unknown): BuyRequest {
  const o = requireObject(body, ['userId']);
  return { userId: requireId('userId', o.userId) };
}

/** An order id, `<sku>-<n>` (n ≥ 1): returns the sku. */
export function parseOrderId(value: unknown): { orderId: string; sku: string } {
  const match = typeof value === 'string' ? /^(.+)-([1-9]\d{0,9})$/.exec(value) : null;
  if (!match || !isId(value as string) || !isId(match[1])) {
    throw new InvalidInputError('orderId', value, "an order id '<sku>-<n>', e.g. 'phone-1'");
  }
  return { orderId: value as string, sku: match[1] };
}

/** The `waitMs` query parameter: absent (0) or a whole number from 0 to 30,000. */
export function parseWaitMs(value: unknown): number {
  if (value === undefined) return 0;
  if (typeof value !== 'string' || !/^\d{1,6}$/.test(value) || Number(value) > MAX_ORDER_WAIT_MS) {
    throw new InvalidInputError(
      'waitMs',
      value,
      `a whole number of ms from 0 to ${MAX_ORDER_WAIT_MS}`,
    );
  }
  return Number(value);
}

function isId(value: string): boolean {
  try {
    requireId('id', value);
    return true;
  } catch {
    return false;
  }
}
