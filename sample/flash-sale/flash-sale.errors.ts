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

/** The stock is 0 (HTTP 410 Gone: it will not come back). */
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

/** No order has this id (HTTP 404): never sold, or its unit went back to the stock. */
export class OrderNotFoundError extends SampleError {
  readonly kind = 'not-found';

  constructor(readonly orderId: string) {
    super(`no order '${orderId}'`, { orderId });
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
