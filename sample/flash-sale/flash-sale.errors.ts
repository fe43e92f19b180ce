import type { Order } from './flash-sale.dto';
import { SampleError } from '../common/sample.error';

/** No sale has this sku (HTTP 404). */
export class SaleNotFoundError extends SampleError {
  readonly kind = 'not-found';

  constructor(readonly sku: string) {
    super(`no flash sale '${sku}'`, { sku });
  }
}

/** `POST /flash-sales` for a sku that already has a sale (HTTP 409). */
export class SaleExistsError extends SampleError {
  readonly kind = 'conflict';

  constructor(readonly sku: string) {
    super(`flash sale '${sku}' exists already`, { sku });
  }
}

/**
 * The stock is 0 (HTTP 410 Gone; a unit whose purchase was never confirmed may still go back on
 * sale, see `SaleSettler`).
 */
export class SoldOutError extends SampleError {
  readonly kind = 'gone';

  constructor(
    readonly sku: string,
    readonly sold: number,
  ) {
    super(`flash sale '${sku}' is sold out: all ${sold} units are sold`, { sku, sold });
  }
}

/** The user bought a unit of this sale already: one per buyer (HTTP 409, naming their order). */
export class AlreadyBoughtError extends SampleError {
  readonly kind = 'conflict';

  constructor(
    readonly sku: string,
    readonly userId: string,
    readonly orderId: string,
  ) {
    super(`user '${userId}' already bought '${sku}' (order ${orderId}); one unit per buyer`, {
      sku,
      userId,
      orderId,
    });
  }
}

/** No order has this id (HTTP 404): never sold (an order whose unit went back on sale is `released`). */
export class OrderNotFoundError extends SampleError {
  readonly kind = 'not-found';

  constructor(readonly orderId: string) {
    super(`no order '${orderId}'`, { orderId });
  }
}

/**
 * A unit was taken from the stock for this buyer, but the purchase could not be confirmed (the
 * sale's write or its order's enqueue did not reach a replica, Redis timed out…): HTTP 503 +
 * `Retry-After`, naming the order so the buyer can follow it. Within `holdMs` of the purchase
 * (plus the time Redis takes to recover) the order either is written (`GET /orders/:id` says
 * `created`) or its unit goes back on sale (`released`); the buyer is never charged unseen.
 */
export class OrderUnconfirmedError extends SampleError {
  readonly kind = 'unavailable';

  constructor(
    readonly order: Order,
    holdMs: number,
    /** Why it is not confirmed, e.g. the message of the Redis error. */
    readonly reason: string,
  ) {
    const orderUrl = `/orders/${order.orderId}`;
    super(
      `order ${order.orderId} of user '${order.userId}' for '${order.sku}' is not confirmed ` +
        `(${reason}); follow ${orderUrl}: it is written or its unit goes back on sale ` +
        `within ${holdMs} ms once Redis is back`,
      { sku: order.sku, userId: order.userId, orderId: order.orderId, orderUrl },
    );
  }
}

/**
 * The sale changed between the batch's read and its write under the stock lock (its `seq` moved:
 * the lock was lost, say Redis stalled past its TTL, and another instance sold meanwhile). Nothing
 * was taken: HTTP 503 + `Retry-After`, and the buyer's retry buys under the lock again.
 */
export class SaleChangedError extends SampleError {
  readonly kind = 'unavailable';

  constructor(
    readonly sku: string,
    reason: string,
  ) {
    super(`flash sale '${sku}' changed while a batch was sold (${reason}): nothing was taken`, {
      sku,
    });
  }
}

/**
 * On a Redis Cluster, a sale's write reached fewer replicas than required within the wait: a
 * failover now could lose it. Answered 503 + Retry-After (`outageOf` says Redis); the buyer's
 * retry finds their unit or buys again.
 */
export class ReplicaLagError extends Error {
  constructor(
    readonly key: string,
    readonly acked: number,
    wait: { replicas: number; timeoutMs: number },
  ) {
    super(
      `Redis replication: the write of '${key}' reached ${acked} of ${wait.replicas} replica(s) ` +
        `within ${wait.timeoutMs} ms`,
    );
    this.name = 'ReplicaLagError';
  }
}
