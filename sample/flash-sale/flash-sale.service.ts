import { Injectable } from '@nestjs/common';
import {
  type Lock,
  LockService,
  PassRequiredError,
  QueueError,
  QueueFullError,
  QueueService,
  WaitingRoomService,
} from '../../lib';
import { outageOf } from '../common/outage';
import { SampleConfig } from '../config/sample-config';
import { requireLock } from '../common/require-lock';
import { SampleRedis } from '../redis/sample-redis';
import type {
  BuyAccepted,
  SaleWaitingRoom,
  CreateSaleRequest,
  Order,
  OrderRow,
  OrderView,
  SaleStatus,
} from './flash-sale.dto';
import {
  AlreadyBoughtError,
  OrderNotFoundError,
  OrderUnconfirmedError,
  ReplicaLagError,
  SaleExistsError,
  SaleNotFoundError,
  SoldOutError,
} from './flash-sale.errors';
import {
  ORDERS_QUEUE,
  saleKeys,
  saleRoom,
  salesIndexKey,
  STOCK_LOCK_TEMPLATE,
  stockLockKey,
  type SaleKeys,
} from './flash-sale-keys';
import { OrdersRepository } from './orders.repository';
import { SaleUnits } from './sale-units';

/**
 * The stock lock of a purchase: buyers wait up to 2 s in a first-come-first-served line (then
 * 423 Locked); metrics name it by its template.
 */
const STOCK_LOCK = { waitMs: 2_000, label: STOCK_LOCK_TEMPLATE } as const;

/**
 * On a Cluster or Sentinel: the replicas a sale and its order must reach before the buyer gets 202.
 */
const REPLICA_WAIT = { replicas: 1, timeoutMs: 1_000 } as const;

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
 * The flash sale: stock and buyers of each sale live in Redis, the orders are rows in PostgreSQL
 * (`OrdersRepository`). Every change of a sale's stock runs under the lock `stock:<sku>` (the
 * controller's `@WithLock` for a new sale, batches of purchases in `buy`), so the checks are plain
 * reads and a batch's write one script (`SaleUnits.take`, which also refuses a write whose lock
 * was lost): 10 units never become 11 orders. Writing the order, the slow part, is handed to the
 * `orders` queue (`OrdersWorker`).
 */
@Injectable()
export class FlashSaleService {
  constructor(
    private readonly redis: SampleRedis,
    private readonly queues: QueueService,
    private readonly locks: LockService,
    private readonly rows: OrdersRepository,
    private readonly units: SaleUnits,
    private readonly config: SampleConfig,
    private readonly rooms: WaitingRoomService,
  ) {}

  /**
   * Opens a sale. Runs under the lock `stock:<sku>`.
   * @throws SaleExistsError when the sku has a sale already
   */
  async create(request: CreateSaleRequest): Promise<SaleStatus> {
    const { sku, stock, price, waitingRoom } = request;
    const k = this.keys(sku);
    requireLock(this.locks, stockLockKey(sku), 'FlashSaleService.create');
    if (await this.redis.client.exists(k.sale)) throw new SaleExistsError(sku);
    // Indexed first, so that `SaleSettler` finds every sale that can have units to settle.
    await this.redis.client.sadd(salesIndexKey(this.redis.prefix), sku);
    // The room first: a sale that says it has one always has it.
    if (waitingRoom) await this.rooms.open(saleRoom(sku), waitingRoom);
    await this.redis.client.hset(k.sale, { stock, sold: 0, price, seq: 0 });
    if (waitingRoom) await this.redis.client.hset(k.sale, 'room', 1);
    return { sku, stock, sold: 0, orders: 0, pending: 0 };
  }

  /**
   * Sells one unit to `userId`: under the lock `stock:<sku>`, checks the sale, the buyer and the
   * stock, decrements the stock, records the buyer with the order and enqueues the order (task
   * id = order id) on the `orders` queue, whose worker writes the row.
   *
   * The buyers of one instance who press buy while a batch is being sold are sold to together
   * in the next batch (`withLockBatch`): one acquisition, one read and one write for the whole
   * batch, so the hot key sells as fast as buyers arrive instead of one unit per lock handoff.
   *
   * Backpressure: when the `orders` queue is full (`maxSize`), the unit goes back to the stock
   * under the same lock and the buyer gets `QueueFullError` (503 + Retry-After).
   *
   * When the enqueue failed after the sale for another reason (Redis trouble), the unit stays
   * taken and held, and the buyer gets `OrderUnconfirmedError` (503 naming the order):
   * `SaleSettler` writes it or puts it back on sale within `saleHoldMs`, retry or not.
   *
   * A user who bought already is refused; if their order was never written, it is enqueued
   * again first, so a retry settles the order sooner: enqueueing an id twice adds it once, and
   * the worker writes a row once (none if the unit went back on sale meanwhile).
   * @returns the order id and where to follow it
   * @throws SaleNotFoundError, AlreadyBoughtError (one unit per buyer), SoldOutError,
   *   QueueFullError (503), OrderUnconfirmedError (503), SaleChangedError (503: the stock lock
   *   was lost before the write), LockTimeoutError (the stock lock could not be had within 2 s:
   *   423)
   */
  async buy(sku: string, userId: string): Promise<BuyAccepted> {
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
    return { orderId: order.orderId, orderUrl: `/orders/${order.orderId}` };
  }

  /**
   * Changes the settings of the sale's waiting room live (opens one for a sale created without:
   * from then on `buy` needs a pass). The route checks that the sale exists first.
   */
  async setWaitingRoom(sku: string, room: SaleWaitingRoom): Promise<void> {
    await this.rooms.open(saleRoom(sku), room);
    await this.redis.client.hset(this.keys(sku).sale, 'room', 1);
  }

  /**
   * A sale with a waiting room sells only to buyers holding its pass (one read for a sale
   * without one).
   * @throws PassRequiredError (403 through `LockInterceptor`)
   */
  async requirePass(sku: string, userId: string): Promise<void> {
    if (!(await this.redis.client.hexists(this.keys(sku).sale, 'room'))) return;
    const room = saleRoom(sku);
    if (!(await this.rooms.hasPass(room, userId))) throw new PassRequiredError(room, userId);
  }

  /**
   * Fast refusal before the lock (used by `SoldOutGuard`): a sold-out sale is refused with one
   * read. A buyer who bought already passes (`buy` answers 409 with their order and enqueues it
   * again if it was never written: a buyer whose answer was lost, say the instance crashed, must
   * learn their order id on the retry, not 410). A sale that is not sold out (or does not exist)
   * passes; `buy` decides under the lock.
   * @throws SoldOutError
   */
  async refuseIfSoldOut(sku: string, userId?: string): Promise<void> {
    const k = this.keys(sku);
    const [[stock, sold], bought] = (await this.redis.exec(
      this.redis.client
        .pipeline()
        .hmget(k.sale, 'stock', 'sold')
        .hexists(k.buyers, userId ?? ''),
    )) as [(string | null)[], number];
    if (stock !== null && Number(stock) <= 0 && !bought) throw new SoldOutError(sku, Number(sold));
  }

  /**
   * `{ sku, stock, sold, orders, pending }` of a sale (`orders`: rows written, counted at most
   * 250 ms ago). @throws SaleNotFoundError
   */
  async status(sku: string): Promise<SaleStatus> {
    const [sale, orders] = await Promise.all([
      this.redis.client.hmget(this.keys(sku).sale, 'stock', 'sold'),
      this.rows.recentCount(sku),
    ]);
    if (sale[0] === null) throw new SaleNotFoundError(sku);
    const stock = Number(sale[0]);
    const sold = Number(sale[1]);
    return { sku, stock, sold, orders, pending: sold - orders };
  }

  /** The orders written so far (rows), by order number. @throws SaleNotFoundError */
  async orders(sku: string): Promise<OrderRow[]> {
    const [exists, rows] = await Promise.all([
      this.redis.client.exists(this.keys(sku).sale),
      this.rows.list(sku),
    ]);
    if (!exists) throw new SaleNotFoundError(sku);
    return rows;
  }

  /**
   * Where the order `orderId` of the sale of `sku` is: `created` (its row), `failed` (its task
   * went to the dead letters), `released` (never confirmed: its unit went back on sale) or
   * `pending`. A pending order is waited for up to `waitMs` through `QueueService.waitFor` (no
   * polling), then looked up again.
   * @throws OrderNotFoundError for an id never sold
   */
  async order(orderId: string, sku: string, waitMs: number): Promise<OrderView> {
    const view = await this.lookUp(orderId, sku);
    if (view.state !== 'pending' || waitMs === 0) return view;
    try {
      await this.queues.waitFor(ORDERS_QUEUE, orderId, { timeoutMs: waitMs });
    } catch (err) {
      // Timed out, or no task (its enqueue failed: `SaleSettler` settles it): still pending.
      if (!(err instanceof QueueError)) throw err;
      return view;
    }
    return this.lookUp(orderId, sku);
  }

  private async lookUp(orderId: string, sku: string): Promise<OrderView> {
    // The database out of reach: the row can't be read, so the order is looked up in Redis (it
    // stays pending until the worker writes it, once the database is back).
    const row = await this.rows.find(orderId).catch((err: unknown) => {
      if (outageOf(err) !== 'the database') throw err;
      return undefined;
    });
    if (row) return { ...row, state: 'created' };
    const k = this.keys(sku);
    const [json, released] = (await this.redis.exec(
      this.redis.client.pipeline().hget(k.orders, orderId).hget(k.released, orderId),
    )) as [string | null, string | null];
    if (json === null && released !== null) {
      return {
        ...(JSON.parse(released) as Order),
        state: 'released',
        fence: null,
        createdAt: null,
      };
    }
    if (json === null) throw new OrderNotFoundError(orderId);
    const task = await this.queues.get(ORDERS_QUEUE, orderId);
    // A task completed since `find` ran has its row now.
    if (task?.state === 'completed') return this.lookUp(orderId, sku);
    const order = JSON.parse(json) as Order;
    const state = task?.state === 'dead' ? 'failed' : 'pending';
    return { ...order, state, fence: null, createdAt: null };
  }

  /** One function object, so that the purchases of one instance are combined into batches. */
  private readonly sellBatch = (purchases: Purchase[], lock: Lock) => this.sell(purchases, lock);

  /**
   * Sells to a batch of buyers of one sale, in order, under its stock lock: one read of the sale
   * and of the buyers' records, one write of every unit sold, then the batch's orders enqueued;
   * the units of orders the full queue refused go back to the stock in one more write.
   */
  private async sell(purchases: Purchase[], lock: Lock): Promise<Array<Sold | Error>> {
    const { sku } = purchases[0];
    const k = this.keys(sku);
    requireLock(this.locks, stockLockKey(sku), 'FlashSaleService.buy');
    const users = purchases.map((p) => p.userId);
    const [sale, records] = (await this.redis.exec(
      this.redis.client
        .pipeline()
        .hmget(k.sale, 'stock', 'sold', 'price', 'seq')
        .hmget(k.buyers, ...users),
    )) as [(string | null)[], (string | null)[]];
    const [stock, sold, price, seq] = sale;
    if (stock === null) return purchases.map(() => new SaleNotFoundError(sku));
    let left = Number(stock);
    let count = Number(sold);
    let number = Number(seq);
    const boughtNow = new Map<string, Order>();
    const results = purchases.map(({ userId }, i): Sold | Error => {
      const earlier = boughtNow.get(userId);
      if (earlier) return { order: earlier, repeated: true };
      if (records[i] !== null) return { order: JSON.parse(records[i]!) as Order, repeated: true };
      if (left <= 0) return new SoldOutError(sku, count);
      left--;
      count++;
      number++;
      const order: Order = {
        orderId: `${sku}-${number}`,
        sku,
        userId,
        price: Number(price),
        boughtAt: new Date().toISOString(),
      };
      boughtNow.set(userId, order);
      return { order, repeated: false };
    });
    if (boughtNow.size === 0) return results;
    // Past this point we write: if the lock was lost (e.g. Redis stalled beyond its TTL), another
    // buyer may be inside the critical section, so stop (`LockLostError`: the buyers get a 503
    // and may retry). A loss noticed only later is caught by the write (`SaleChangedError`).
    lock.signal.throwIfAborted();
    const units = [...boughtNow.values()];
    // One script, not a MULTI: ioredis may send the write again after a failover, and the script
    // takes the batch's units once (`take-units.lua`); every unit taken is held until settled.
    await this.units.take(sku, Number(seq), units);
    const refused = new Map<string, Error>();
    try {
      // On a Cluster or Sentinel, a sale a failover could still lose (its master not yet
      // replicated) is not answered 202: the buyers get 503. Without it, a promoted replica would
      // sell the same units a second time.
      if (this.redis.replicated) await this.waitForReplica(k.sale);
      // Still under the lock: an order the full queue refuses gives its unit back before anyone
      // else can see the stock.
      const enqueued = await Promise.allSettled(units.map((order) => this.enqueue(order)));
      enqueued.forEach((outcome, i) => {
        if (outcome.status === 'rejected') refused.set(units[i].userId, outcome.reason as Error);
      });
      const full = units.filter((o) => refused.get(o.userId) instanceof QueueFullError);
      await this.units.release(
        sku,
        full.map((o) => o.orderId),
      );
    } catch (err) {
      for (const o of units) refused.set(o.userId, err as Error);
    }
    // A 202 promises the order: only while `SaleSettler` cannot have given the unit back yet (it
    // waits `saleHoldMs`), so a purchase that took longer than half of it is not confirmed.
    const tookMs = Date.now() - Date.parse(units[0].boughtAt);
    const late = tookMs > this.config.saleHoldMs / 2;
    // Any other failure leaves the unit taken and held, and its buyer is told which order to
    // follow (503 naming it): `SaleSettler` settles it within the hold, whether or not the buyer
    // retries (a retry meanwhile enqueues it again, see `buy`). A refused unit's buyer gets the
    // refusal, also for a second press in this same batch.
    return results.map((result) => {
      if (result instanceof Error) return result;
      const err = refused.get(result.order.userId);
      if (err instanceof QueueFullError) return err;
      if (err === undefined && !(late && boughtNow.get(result.order.userId) === result.order)) {
        return result;
      }
      const reason = err?.message ?? `confirmed ${tookMs} ms after the sale, too late`;
      return new OrderUnconfirmedError(result.order, this.config.saleHoldMs, reason);
    });
  }

  private keys(sku: string): SaleKeys {
    return saleKeys(this.redis.prefix, sku);
  }

  /**
   * Enqueues `order` again unless its row is written: safe however often it runs, since the task
   * id is the order id (a queued or leased id is not added twice) and the worker's insert writes
   * a row once.
   */
  private async enqueueIfNotCreated(order: Order): Promise<void> {
    if (await this.rows.find(order.orderId)) return;
    await this.enqueue(order);
  }

  /**
   * Enqueues the order (task id = order id); on a Cluster or Sentinel, waits for a replica to have
   * it (`QueueReplicationError` otherwise: the buyer gets a 503 naming the order).
   */
  private enqueue(order: Order): Promise<number> {
    return this.queues.enqueue(ORDERS_QUEUE, order.orderId, {
      payload: order,
      ...(this.redis.replicated && { waitForReplicas: REPLICA_WAIT }),
    });
  }

  /** `WAIT` on the master of `key`'s slot. @throws ReplicaLagError when no replica has the writes */
  private async waitForReplica(key: string): Promise<void> {
    const [, acked] = (await this.redis.exec(
      this.redis.client.pipeline().exists(key).wait(REPLICA_WAIT.replicas, REPLICA_WAIT.timeoutMs),
    )) as [number, number];
    if (acked < REPLICA_WAIT.replicas) throw new ReplicaLagError(key, acked, REPLICA_WAIT);
  }
}
