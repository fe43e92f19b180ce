import {
  type BeforeApplicationShutdown,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { LockService, LockTimeoutError, QueueService, type QueueTaskState } from '../../lib';
import { SampleConfig } from '../config/sample-config';
import { SampleRedis } from '../redis/sample-redis';
import { ORDERS_QUEUE, saleKeys, salesIndexKey } from './flash-sale-keys';
import { OrdersRepository, type OrderOutcome } from './orders.repository';
import { SaleUnits } from './sale-units';

/** How often the held units of every sale are looked at, in ms (one instance per tick). */
export const SETTLE_EVERY_MS = 1_000;
/** The lock one sweep runs under, so that one instance sweeps at a time. */
const SETTLE_LOCK = 'flash-sale:settle';
/** Most held units of one sale settled per tick (each costs a queue lookup). */
const SETTLE_BATCH = 200;
/** States of an order task that will still write its row: its unit is left held. */
const IN_FLIGHT = new Set<QueueTaskState | undefined>([
  'ready',
  'delayed',
  'leased',
  'waiting-children',
]);

/** What one `settle` call did for one sale. */
export interface SettleReport {
  /** Held units whose row is written: their hold is dropped. */
  ordered: number;
  /** Units that went back on sale. */
  released: number;
  /** Held units past the hold whose order is still in the queue (they are written later). */
  inFlight: number;
}

/**
 * The sweeper that makes sure no unit taken from a sale's stock is stranded: every unit taken is
 * held (`holds`) from the purchase's `MULTI` until it is settled, and a unit held longer than
 * `saleHoldMs` ends one way or the other, whether or not its buyer retries:
 *
 * - its row is written (`order_outcomes` says 'ordered'): the hold is dropped;
 * - its order is in the `orders` queue, not finished: left to the worker (looked at again later);
 * - otherwise (never enqueued, or the enqueue was lost in a failover, or its task died): the unit
 *   goes back on sale. `order_outcomes` records 'released' first, in PostgreSQL, so a late
 *   enqueue of that order (a retry, a purchase still in flight) can never write its row too,
 *   then `release-units.lua` returns the unit to the stock.
 *
 * Every instance tries every second; the one that gets the lock `flash-sale:settle` (no wait)
 * sweeps, the others skip that second. Correctness does not rest on the lock: two sweeps at once
 * decide each order once in PostgreSQL, and the Redis release is atomic and happens at most once
 * per order. The lock only saves the work of a second sweep.
 */
@Injectable()
export class SaleSettler implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('SaleSettler');
  private lastWarn = 0;
  private timer?: NodeJS.Timeout;
  private sweeping?: Promise<void>;

  constructor(
    private readonly redis: SampleRedis,
    private readonly queues: QueueService,
    private readonly rows: OrdersRepository,
    private readonly units: SaleUnits,
    private readonly locks: LockService,
    private readonly config: SampleConfig,
  ) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => {
      // One sweep at a time in this process: a slow one (Redis failing over) is not doubled.
      this.sweeping ??= this.sweep().finally(() => (this.sweeping = undefined));
    }, SETTLE_EVERY_MS);
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.sweeping;
  }

  /** One sweep, on the instance that gets the lock `flash-sale:settle` now (the others skip). */
  private async sweep(): Promise<void> {
    try {
      await this.locks.withLock(SETTLE_LOCK, () => this.settleAll(), { waitMs: 0 });
    } catch (err) {
      if (err instanceof LockTimeoutError) return;
      this.warn(err);
    }
  }

  /**
   * Settles the held units of every sale (a sold-out sale with nothing held leaves the index).
   * Redis or the database in trouble: what is left is settled by the next sweep.
   */
  async settleAll(): Promise<void> {
    const index = salesIndexKey(this.redis.prefix);
    try {
      for (const sku of await this.redis.client.smembers(index)) {
        await this.settle(sku);
        const k = saleKeys(this.redis.prefix, sku);
        const [stock, held] = (await this.redis.exec(
          this.redis.client.multi().hget(k.sale, 'stock').zcard(k.holds),
        )) as [string | null, number];
        // Nothing held and nothing left to sell: no unit of it can be taken or released again.
        if (held === 0 && (stock === null || Number(stock) <= 0)) {
          await this.redis.client.srem(index, sku);
        }
      }
    } catch (err) {
      this.warn(err);
    }
  }

  private warn(err: unknown): void {
    // One line per 5 s at most: Redis or the database down fails every sweep.
    if (Date.now() - this.lastWarn < 5_000) return;
    this.lastWarn = Date.now();
    this.logger.warn(`settling held units failed: ${(err as Error).message}`);
  }

  /**
   * Settles the units of the sale of `sku` held longer than `saleHoldMs` (up to 200 per call).
   * @example
   * const { released } = await settler.settle('phone');
   */
  async settle(sku: string): Promise<SettleReport> {
    const k = saleKeys(this.redis.prefix, sku);
    const due = await this.redis.client.zrangebyscore(
      k.holds,
      '-inf',
      Date.now() - this.config.saleHoldMs,
      'LIMIT',
      0,
      SETTLE_BATCH,
    );
    const known = await this.rows.outcomes(due);
    const open = due.filter((id) => !known.has(id));
    const tasks = await Promise.all(open.map((id) => this.queues.get(ORDERS_QUEUE, id)));
    const idle = open.filter((_, i) => !IN_FLIGHT.has(tasks[i]?.state));
    const decided = new Map<string, OrderOutcome>([...known, ...(await this.rows.release(idle))]);
    const settledAs = (outcome: OrderOutcome) => due.filter((id) => decided.get(id) === outcome);
    const ordered = settledAs('ordered');
    if (ordered.length > 0) await this.redis.client.zrem(k.holds, ...ordered);
    const released = await this.units.release(sku, settledAs('released'));
    return { ordered: ordered.length, released, inFlight: open.length - idle.length };
  }
}
