import autocannon from 'autocannon';
import type { LockLibrary } from '../adapters/lock-adapter';
import type { BenchConfig, FlashSaleConfig } from '../bench-config';
import type { Order, OrderRow, SaleStatus } from '../../sample/flash-sale/flash-sale.dto';
import { buyRequest } from '../../sample/load/buy-request';
import { startPostgresServer, type PostgresServer } from '../../scripts/postgres-server';
import { BenchChild } from '../support/bench-child';
import { percentile } from '../support/bench-stats';
import { monotonicMs, sleep } from '../support/monotonic-clock';
import type { Metrics, Shape } from './shape';

/** Bound of each request besides the load (opening a sale, polling it, reading its orders). */
const REQUEST_TIMEOUT_MS = 10_000;
/** How long the instances' `orders` workers may take to create the orders of a sale. */
const ORDERS_DEADLINE_MS = 60_000;

/** One HTTP answer under load: its status and latency. */
interface Answer {
  status: number;
  ms: number;
}

/** What one load against the instances got. */
interface LoadResult {
  answers: Answer[];
  elapsedMs: number;
  /** Connection errors and timeouts (no HTTP answer). */
  errors: number;
}

async function http<T>(url: string, init?: { method: string; body: unknown }): Promise<T> {
  const response = await fetch(url, {
    method: init?.method ?? 'GET',
    headers: init ? { 'content-type': 'application/json' } : undefined,
    body: init ? JSON.stringify(init.body) : undefined,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  if (!response.ok) {
    throw new Error(
      `${init?.method ?? 'GET'} ${url} answered ${response.status}: ${await response.text()}`,
    );
  }
  return (await response.json()) as T;
}

/**
 * Fires autocannon at every instance at once, `connections` split evenly over them, each with
 * `options` (`amount` or `duration` per instance); collects every answer.
 */
async function fire(
  urls: readonly string[],
  connections: number,
  options: Omit<autocannon.Options, 'url' | 'connections'>,
): Promise<LoadResult> {
  const answers: Answer[] = [];
  const started = monotonicMs();
  const results = await Promise.all(
    urls.map((url) => {
      const load = autocannon({
        url,
        connections: Math.max(1, Math.round(connections / urls.length)),
        timeout: 10,
        ...options,
      });
      load.on('response', (_client: unknown, status: number, _bytes: number, ms: number) =>
        answers.push({ status, ms }),
      );
      return load;
    }),
  );
  const errors = results.reduce((sum, r) => sum + r.errors, 0);
  return { answers, elapsedMs: monotonicMs() - started, errors };
}

/** Buys of `buyers` distinct users (one each) of `sku`, `buyers / urls.length` per instance. */
function buyLoad(urls: readonly string[], connections: number, sku: string, buyers: number) {
  let next = 0;
  return fire(urls, connections, {
    amount: Math.ceil(buyers / urls.length),
    requests: [buyRequest(sku, () => `buyer-${next++}`)],
  });
}

/** Polls the sale until no order is pending, or `ORDERS_DEADLINE_MS` passes. */
async function waitForOrders(url: string, sku: string): Promise<SaleStatus> {
  const deadline = monotonicMs() + ORDERS_DEADLINE_MS;
  for (;;) {
    const sale = await http<SaleStatus>(`${url}/flash-sales/${sku}`);
    if (sale.pending === 0 || monotonicMs() > deadline) return sale;
    await sleep(20);
  }
}

/** Opens a sale of `stock` units of `sku` (through the first instance). */
async function openSale(url: string, sku: string, stock: number): Promise<void> {
  await http(`${url}/flash-sales`, { method: 'POST', body: { sku, stock, price: 99 } });
}

/**
 * Units sold per second at the hot key: the orders' `boughtAt` (set under the stock lock), from
 * the first unit sold to the last; `NaN` for fewer than two orders.
 */
export function sellRate(orders: readonly Pick<Order, 'boughtAt'>[]): number {
  const times = orders.map((o) => Date.parse(o.boughtAt)).sort((a, b) => a - b);
  if (times.length < 2) return NaN;
  const spanMs = times[times.length - 1] - times[0];
  return spanMs > 0 ? ((times.length - 1) / spanMs) * 1000 : NaN;
}

/**
 * From buy to order row: for each row, `createdAt` (written by the orders worker, PostgreSQL's
 * clock) minus `boughtAt` (stamped under the stock lock, the instance's clock: same machine),
 * p50 and p99 in ms; and rows written per second, first row to last.
 */
export function rowTimes(orders: readonly Pick<OrderRow, 'boughtAt' | 'createdAt'>[]): {
  p50Ms: number;
  p99Ms: number;
  rowsPerSec: number;
} {
  const delays = orders.map((o) => Date.parse(o.createdAt) - Date.parse(o.boughtAt));
  const created = orders.map((o) => Date.parse(o.createdAt)).sort((a, b) => a - b);
  const spanMs = created.length > 1 ? created[created.length - 1] - created[0] : 0;
  return {
    p50Ms: delays.length > 0 ? percentile(delays, 50) : NaN,
    p99Ms: delays.length > 0 ? percentile(delays, 99) : NaN,
    rowsPerSec: spanMs > 0 ? ((created.length - 1) / spanMs) * 1000 : NaN,
  };
}

/**
 * The flash-sale metrics of one run: `sellPerSec` (units per second at the hot key),
 * `ceilingPerSec` (GETs of the sale's status per second, same instances and connections),
 * `buyPerSec` (buy answers per second), `locked` (buys answered 423: the lock wait ran out),
 * `buyP50Ms`/`buyP99Ms` (every buy answer), `rowP50Ms`/`rowP99Ms` (buy to order row, see
 * `rowTimes`), `rowsPerSec`, `unavailable` (buys answered 503: orders queue full or Redis
 * trouble), `sold`, `soldOut` (1 when the stock ran out), `oversold` (units sold, orders or 202
 * answers beyond the stock), `lost` (units sold without a row once the orders were waited for),
 * `unexpected` (answers other than 202/409/410/423/503, connection errors, and 202s that differ
 * from the units sold).
 */
export function summarizeFlashSale(
  sale: FlashSaleConfig,
  buys: LoadResult,
  ceiling: LoadResult,
  status: SaleStatus,
  orders: readonly OrderRow[],
): Metrics {
  const count = (status: number) => buys.answers.filter((a) => a.status === status).length;
  const accepted = count(202);
  const expected = [202, 409, 410, 423, 503].reduce((sum, s) => sum + count(s), 0);
  const rows = rowTimes(orders);
  const okGets = ceiling.answers.filter((a) => a.status === 200).length;
  return {
    sellPerSec: sellRate(orders),
    ceilingPerSec: (okGets / ceiling.elapsedMs) * 1000,
    buyPerSec: (buys.answers.length / buys.elapsedMs) * 1000,
    locked: count(423),
    unavailable: count(503),
    rowP50Ms: rows.p50Ms,
    rowP99Ms: rows.p99Ms,
    rowsPerSec: rows.rowsPerSec,
    lost: Math.max(0, status.sold - orders.length),
    buyP50Ms: percentile(
      buys.answers.map((a) => a.ms),
      50,
    ),
    buyP99Ms: percentile(
      buys.answers.map((a) => a.ms),
      99,
    ),
    sold: status.sold,
    soldOut: status.stock === 0 ? 1 : 0,
    oversold: Math.max(
      0,
      status.sold - sale.stock,
      orders.length - sale.stock,
      accepted - sale.stock,
    ),
    unexpected:
      buys.answers.length -
      expected +
      buys.errors +
      (ceiling.answers.length - okGets) +
      ceiling.errors +
      Math.abs(accepted - status.sold),
  };
}

/**
 * The flash-sale shape (ours only: it runs this library's sample app, as it ships): two
 * instances of the sample in child processes on the bench Redis. After an unmeasured warm-up
 * sale, the HTTP ceiling of the instances: GET of the sale's status with the same connections
 * for `ceilingMs`. Then the sale: `stock` units, `buyers` distinct buyers over `connections`
 * connections split over both instances; when its orders are created, `summarizeFlashSale`.
 */
export function flashSaleShape(config: BenchConfig): Shape<LockLibrary> {
  const sale = config.flashSale;
  return {
    id: 'flash-sale',
    title:
      `flash-sale: two sample instances, stock ${sale.stock.toLocaleString('en-US')}, ` +
      `${sale.buyers.toLocaleString('en-US')} buyers, ${sale.connections} connections`,
    // Two Nest apps start, a warm-up sale, the ceiling, the sale, and its orders.
    timeoutMs: sale.ceilingMs + 2 * ORDERS_DEADLINE_MS + 120_000,
    async run(library, ctx) {
      if (library.id !== 'ours') throw new Error('flash-sale runs the sample app: ours only');
      const starting = await Promise.allSettled(
        [100, 101].map((index) => BenchChild.start(index, 'sample-instance.ts')),
      );
      const instances = starting.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
      // The orders go to a private PostgreSQL both instances share (`npm run ensure-postgres`).
      let postgres: PostgresServer | undefined;
      try {
        for (const s of starting) if (s.status === 'rejected') throw s.reason;
        postgres = await startPostgresServer();
        const keyPrefix = `bench:flash-sale:${ctx.round}:`;
        const databaseUrl = postgres.url;
        const urls = await Promise.all(
          instances.map((c) =>
            c.call<string>('listen', { redisUrl: ctx.url, keyPrefix, databaseUrl }),
          ),
        );
        const warmUp = `warm-up-${ctx.round}`;
        await openSale(urls[0], warmUp, sale.warmUpStock);
        await buyLoad(urls, sale.connections, warmUp, sale.warmUpBuyers);
        await waitForOrders(urls[0], warmUp);

        const sku = `sale-${ctx.round}`;
        await openSale(urls[0], sku, sale.stock);
        const ceiling = await fire(urls, sale.connections, {
          duration: sale.ceilingMs / 1000,
          requests: [{ method: 'GET', path: `/flash-sales/${sku}` }],
        });
        const buys = await buyLoad(urls, sale.connections, sku, sale.buyers);
        const status = await waitForOrders(urls[0], sku);
        const orders = await http<OrderRow[]>(`${urls[0]}/flash-sales/${sku}/orders`);
        return summarizeFlashSale(sale, buys, ceiling, status, orders);
      } finally {
        await Promise.allSettled(instances.map((c) => c.stop()));
        await postgres?.destroy();
      }
    },
  };
}
