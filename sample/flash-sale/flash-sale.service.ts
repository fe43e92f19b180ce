import { Injectable } from '@nestjs/common';
import { type Lock, LockService, QueueService } from '../../lib';
import { requireLock } from '../common/require-lock';
import { SampleRedis } from '../redis/sample-redis';
import type { CreateSaleRequest, Order, SaleStatus } from './flash-sale.dto';
import {
  AlreadyBoughtError,
  SaleExistsError,
  SaleNotFoundError,
  SoldOutError,
} from './flash-sale.errors';
import {
  ORDERS_QUEUE,
  saleKeys,
  STOCK_LOCK_TEMPLATE,
  stockLockKey,
  type SaleKeys,
} from './flash-sale-keys';

/**
 * The stock lock of a purchase: buyers wait up to 2 s in a first-come-first-served line (then
 * 423 Locked); metrics name it by its template.
 */
const STOCK_LOCK = { waitMs: 2_000, label: STOCK_LOCK_TEMPLATE } as const;

/** One buyer's purchase, an item of a sale batch. */
interface Purchase {
  sku: string;
  userId: string;
}

/** A batch's answer to one buyer: the order sold now, or the one the buyer bought before. */
interface Sold {
  order: Order;
  repeated: boolean;
}

/**
 * The flash sale: stock, buyers and orders of each sale live in Redis. Every change of a sale's
 * stock runs under the lock `stock:<sku>` (the controller's `@WithLock` for a new sale, batches
 * of purchases in `buy`), so the checks
 * and the decrement can be plain commands: 10 units never become 11 orders. Order creation, the
 * slow part, is handed to the `orders` queue.
 */
@Injectable()
export class FlashSaleService {
  constructor(
    private readonly redis: SampleRedis,
    private readonly queues: QueueService,
    private readonly locks: LockService,
  ) {}

  /**
   * Opens a sale. Runs under the lock `stock:<sku>`.
   * @throws SaleExistsError when the sku has a sale already
   */
  async create(request: CreateSaleRequest): Promise<SaleStatus> {
    const { sku, stock, price } = request;
    const k = this.keys(sku);
    requireLock(this.locks, stockLockKey(sku), 'FlashSaleService.create');
    if (await this.redis.client.exists(k.sale)) throw new SaleExistsError(sku);
    await this.redis.client.hset(k.sale, { stock, sold: 0, price });
    return { sku, stock, sold: 0, orders: 0, pending: 0 };
  }

  /**
   * Sells one unit to `userId`: checks the sale, the buyer and the stock, decrements the stock
   * and records the buyer with the order under the lock `stock:<sku>`, then enqueues the order
   * (task id = order id) after the lock is released.
   *
   * The buyers of one instance who press buy while a batch is being sold are sold to together
   * in the next batch (`withLockBatch`): one acquisition, one read and one write for the whole
   * batch, so the hot key sells as fast as buyers arrive instead of one unit per lock handoff.
   *
   * A user who bought already is refused; if their order was never created, it is enqueued
   * again first. So when the enqueue failed after the sale (the buyer got an error), the
   * buyer's retry repairs it: enqueueing an id twice adds it once, and `createOrder` creates an
   * order once.
   * @throws SaleNotFoundError, AlreadyBoughtError (one unit per buyer), SoldOutError,
   *   LockTimeoutError (the stock lock could not be had within 2 s: 423)
   */
  async buy(sku: string, userId: string): Promise<Order> {
    const { order, repeated } = await this.locks.withLockBatch(
      stockLockKey(sku),
      { sku, userId },
      this.sellBatch,
      STOCK_LOCK,
    );
    if (repeated) {
      await this.enqueueIfNotCreated(order);
      throw new AlreadyBoughtError(sku, userId, order.orderId);
    }
    // If this fails, the unit is sold and the order is in the buyers record: the buyer's retry
    // enqueues it again (see above).
    await this.queues.enqueue(ORDERS_QUEUE, order.orderId, { payload: order });
    return order;
  }

  /**
   * Fast refusal before the lock (used by `SoldOutGuard`): stock only goes down, so a sale seen
   * sold out stays sold out. A sale that is not sold out (or does not exist) passes; `buy`
   * decides under the lock.
   * @throws SoldOutError
   */
  async refuseIfSoldOut(sku: string): Promise<void> {
    const [stock, sold] = await this.redis.client.hmget(this.keys(sku).sale, 'stock', 'sold');
    if (stock !== null && Number(stock) <= 0) throw new SoldOutError(sku, Number(sold));
  }

  /**
   * Creates the order of a purchase (the `orders` worker's job) once: a second delivery of the
   * same task finds the order there and changes nothing.
   * @returns whether this call created it
   */
  async createOrder(order: Order): Promise<boolean> {
    const created = await this.redis.client.hsetnx(
      this.keys(order.sku).orders,
      order.orderId,
      JSON.stringify(order),
    );
    return created === 1;
  }

  /** `{ sku, stock, sold, orders, pending }` of a sale. @throws SaleNotFoundError */
  async status(sku: string): Promise<SaleStatus> {
    const k = this.keys(sku);
    const [sale, orders] = (await this.redis.exec(
      this.redis.client.multi().hmget(k.sale, 'stock', 'sold').hlen(k.orders),
    )) as [(string | null)[], number];
    if (sale[0] === null) throw new SaleNotFoundError(sku);
    const stock = Number(sale[0]);
    const sold = Number(sale[1]);
    return { sku, stock, sold, orders, pending: sold - orders };
  }

  /** The orders created so far, by order id. @throws SaleNotFoundError */
  async orders(sku: string): Promise<Order[]> {
    const k = this.keys(sku);
    const [exists, values] = (await this.redis.exec(
      this.redis.client.multi().exists(k.sale).hvals(k.orders),
    )) as [number, string[]];
    if (!exists) throw new SaleNotFoundError(sku);
    return values
      .map((json) => JSON.parse(json) as Order)
      .sort((a, b) => a.orderId.localeCompare(b.orderId, 'en', { numeric: true }));
  }

  /** One function object, so that the purchases of one instance are combined into batches. */
  private readonly sellBatch = (purchases: Purchase[], lock: Lock) => this.sell(purchases, lock);

  /**
   * Sells to a batch of buyers of one sale, in order, under its stock lock: one read of the sale
   * and of the buyers' records, one write of every unit sold. Every order of a batch carries the
   * batch's fence.
   */
  private async sell(purchases: Purchase[], lock: Lock): Promise<Array<Sold | Error>> {
    const { sku } = purchases[0];
    const k = this.keys(sku);
    requireLock(this.locks, stockLockKey(sku), 'FlashSaleService.buy');
    const users = purchases.map((p) => p.userId);
    const [sale, records] = (await this.redis.exec(
      this.redis.client
        .pipeline()
        .hmget(k.sale, 'stock', 'sold', 'price')
        .hmget(k.buyers, ...users),
    )) as [(string | null)[], (string | null)[]];
    const [stock, sold, price] = sale;
    if (stock === null) return purchases.map(() => new SaleNotFoundError(sku));
    let left = Number(stock);
    let count = Number(sold);
    const boughtNow = new Map<string, Order>();
    const results = purchases.map(({ userId }, i): Sold | Error => {
      const earlier = boughtNow.get(userId);
      if (earlier) return { order: earlier, repeated: true };
      if (records[i] !== null) return { order: JSON.parse(records[i]!) as Order, repeated: true };
      if (left <= 0) return new SoldOutError(sku, count);
      left--;
      count++;
      const order: Order = {
        orderId: `${sku}-${count}`,
        sku,
        userId,
        price: Number(price),
        fence: lock.fence,
        boughtAt: new Date().toISOString(),
      };
      boughtNow.set(userId, order);
      return { order, repeated: false };
    });
    if (boughtNow.size === 0) return results;
    // Past this point we write: if the lock was lost (e.g. Redis stalled beyond its TTL), another
    // buyer may be inside the critical section, so stop (the buyers get a 500 and may retry).
    lock.signal.throwIfAborted();
    const written = Object.fromEntries([...boughtNow].map(([u, o]) => [u, JSON.stringify(o)]));
    await this.redis.exec(
      this.redis.client
        .multi()
        .hincrby(k.sale, 'stock', -boughtNow.size)
        .hincrby(k.sale, 'sold', boughtNow.size)
        .hset(k.buyers, written),
    );
    return results;
  }

  private keys(sku: string): SaleKeys {
    return saleKeys(this.redis.prefix, sku);
  }

  /**
   * Enqueues `order` again unless the worker created it already: safe however often it runs,
   * since the task id is the order id (a queued or leased id is not added twice) and
   * `createOrder` creates an order once.
   */
  private async enqueueIfNotCreated(order: Order): Promise<void> {
    if (await this.redis.client.hexists(this.keys(order.sku).orders, order.orderId)) return;
    await this.queues.enqueue(ORDERS_QUEUE, order.orderId, { payload: order });
  }
}
