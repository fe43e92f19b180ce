import { Injectable } from '@nestjs/common';
import { OrdersDatabase, type SqlParam } from '../database/orders-database';
import type { Order, OrderRow } from './flash-sale.dto';

/** How a unit taken from the stock ended (`order_outcomes`): its row written, or back on sale. */
export type OrderOutcome = 'ordered' | 'released';

/** How old a sale's row count may be when its status is read (`recentCount`). */
const COUNT_MAX_AGE_MS = 250;

const SELECT_ROW = 'SELECT order_id, sku, user_id, price, fence, bought_at, created_at FROM orders';

interface RawRow {
  order_id: string;
  sku: string;
  user_id: string;
  price: string | number;
  fence: string | number;
  bought_at: Date | string;
  created_at: Date | string;
}

/** The `orders` table (see `sample/database/orders.schema.sql`). */
@Injectable()
export class OrdersRepository {
  private readonly counts = new Map<string, { at: number; count: Promise<number> }>();

  constructor(private readonly db: OrdersDatabase) {}

  /**
   * Writes the rows of `orders` in one statement, each with the fence of the task lease that
   * writes it, and records each as 'ordered' in `order_outcomes`. An order whose outcome is
   * recorded already writes nothing: one written already (a task delivered twice, a worker whose
   * lease ran out and was handed to another) keeps its one row, and one whose unit went back on
   * sale (`release`) gets none.
   * @returns the ids of the rows this call wrote
   */
  async insert(orders: ReadonlyArray<{ order: Order; fence: number }>): Promise<string[]> {
    if (orders.length === 0) return [];
    const params: SqlParam[] = [];
    const tuples = orders.map(({ order, fence }) => {
      const n = params.length;
      params.push(order.orderId, order.sku, order.userId, order.price, fence, order.boughtAt);
      return (
        `($${n + 1}::text, $${n + 2}::text, $${n + 3}::text, $${n + 4}::numeric, ` +
        `$${n + 5}::bigint, $${n + 6}::timestamptz)`
      );
    });
    // One statement: the outcome row and the order row are written together or not at all.
    const rows = await this.db.query<{ order_id: string }>(
      `WITH input (order_id, sku, user_id, price, fence, bought_at) AS (VALUES ${tuples.join(', ')}),
       won AS (
         INSERT INTO order_outcomes (order_id, outcome) SELECT order_id, 'ordered' FROM input
         ON CONFLICT (order_id) DO NOTHING RETURNING order_id)
       INSERT INTO orders (order_id, sku, user_id, price, fence, bought_at)
       SELECT i.order_id, i.sku, i.user_id, i.price, i.fence, i.bought_at FROM input i JOIN won USING (order_id)
       ON CONFLICT DO NOTHING RETURNING order_id`,
      params,
    );
    return rows.map((r) => r.order_id);
  }

  /**
   * Records the orders `orderIds` as 'released' (their units go back on sale) unless an outcome
   * is recorded for them already, and answers the outcome of each: 'released' for those this call
   * or an earlier one released, 'ordered' for those whose row is written. The primary key of
   * `order_outcomes` decides a race with the worker's `insert`: the first wins.
   * @returns orderId → outcome (an id whose outcome a concurrent statement is writing is missing:
   *   ask again)
   */
  async release(orderIds: readonly string[]): Promise<Map<string, OrderOutcome>> {
    if (orderIds.length === 0) return new Map();
    // The outer SELECT does not see the CTE's inserts (one snapshot): those come from `won`.
    const rows = await this.db.query<{ order_id: string; outcome: OrderOutcome }>(
      `WITH won AS (
         INSERT INTO order_outcomes (order_id, outcome) SELECT unnest($1::text[]), 'released'
         ON CONFLICT (order_id) DO NOTHING RETURNING order_id)
       SELECT order_id, 'released' AS outcome FROM won
       UNION ALL SELECT order_id, outcome FROM order_outcomes WHERE order_id = ANY($1::text[])`,
      [[...orderIds]],
    );
    return new Map(rows.map((r) => [r.order_id, r.outcome]));
  }

  /** The recorded outcome of each of `orderIds` that has one. */
  async outcomes(orderIds: readonly string[]): Promise<Map<string, OrderOutcome>> {
    if (orderIds.length === 0) return new Map();
    const rows = await this.db.query<{ order_id: string; outcome: OrderOutcome }>(
      'SELECT order_id, outcome FROM order_outcomes WHERE order_id = ANY($1::text[])',
      [[...orderIds]],
    );
    return new Map(rows.map((r) => [r.order_id, r.outcome]));
  }

  /** The row of `orderId`, or `undefined`. */
  async find(orderId: string): Promise<OrderRow | undefined> {
    const rows = await this.db.query<RawRow>(`${SELECT_ROW} WHERE order_id = $1`, [orderId]);
    return rows.length > 0 ? toRow(rows[0]) : undefined;
  }

  /**
   * Rows of the sale of `sku` as counted at most `COUNT_MAX_AGE_MS` ago: the sale's status page
   * is read by every buyer, and one `count(*)` per request would make PostgreSQL the limit of a
   * read that Redis alone answers otherwise. Concurrent callers share one query.
   */
  recentCount(sku: string): Promise<number> {
    const cached = this.counts.get(sku);
    if (cached && Date.now() - cached.at < COUNT_MAX_AGE_MS) return cached.count;
    const count = this.count(sku);
    this.counts.set(sku, { at: Date.now(), count });
    // A failed count is not kept: the next caller asks again.
    count.catch(() => this.counts.delete(sku));
    return count;
  }

  /** Rows of the sale of `sku`. */
  async count(sku: string): Promise<number> {
    const rows = await this.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM orders WHERE sku = $1',
      [sku],
    );
    return Number(rows[0].n);
  }

  /** Every row of the sale of `sku`, by order number. */
  async list(sku: string): Promise<OrderRow[]> {
    const rows = await this.db.query<RawRow>(`${SELECT_ROW} WHERE sku = $1`, [sku]);
    return rows
      .map(toRow)
      .sort((a, b) => a.orderId.localeCompare(b.orderId, 'en', { numeric: true }));
  }
}

function toRow(raw: RawRow): OrderRow {
  return {
    orderId: raw.order_id,
    sku: raw.sku,
    userId: raw.user_id,
    price: Number(raw.price),
    fence: Number(raw.fence),
    boughtAt: new Date(raw.bought_at).toISOString(),
    createdAt: new Date(raw.created_at).toISOString(),
  };
}
