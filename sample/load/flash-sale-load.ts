// `npm run sample:load`: fires a flash sale at the running sample (npm run sample) with
// autocannon — or, with `--instances N`, at N instances it starts itself on one Redis and one
// PostgreSQL (`--database postgres`) — waits until the orders queue has written every order,
// checks the outcome and prints it. Exits 1 when anything was oversold, duplicated or left
// unexplained.
// Options: --stock 100 --buyers 5000 --connections 200 --presses 1 --url http://127.0.0.1:3000
//          --instances 3 --database postgres
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import type { OrderRow, SaleStatus } from '../flash-sale/flash-sale.dto';
import { buyRequest } from './buy-request';
import { latencyHistogram } from './latency-histogram';
import { loadOptions, type LoadOptions } from './load-options';
import { startSampleInstances, type SampleInstances } from './sample-instances';

/**
 * Answers a buy may get under load: bought, already bought, sold out, lock wait ran out, orders
 * queue full (503: the unit went back to the stock).
 */
const EXPECTED_STATUSES = new Set([202, 409, 410, 423, 503]);
/** How long to wait for the workers to create the orders of the units sold. */
const ORDERS_DEADLINE_MS = 60_000;
/**
 * Bound of each request besides the load itself (opening the sale, polling it, reading the
 * orders), so that a sample that stops answering can't stall the run past its deadline.
 */
const REQUEST_TIMEOUT_MS = 5_000;

async function main(): Promise<void> {
  const options = loadOptions(process.argv.slice(2), process.env);
  let started: SampleInstances | undefined;
  let urls = [options.url];
  if (options.instances > 0) {
    console.log(
      `starting ${options.instances} sample instance(s), orders in ` +
        `${options.database === 'postgres' ? 'PostgreSQL' : 'the embedded PostgreSQL'}…`,
    );
    started = await startSampleInstances(options.instances, options.database);
    urls = started.urls;
  }
  try {
    await run(options, urls, started);
  } finally {
    await started?.stop();
  }
}

async function run(options: LoadOptions, urls: string[], started?: SampleInstances): Promise<void> {
  const url = urls[0];
  const sku = `load-${randomBytes(3).toString('hex')}`;
  await createSale(url, sku, options.stock);
  const requests = options.buyers * options.presses;
  console.log(
    `flash sale '${sku}': stock ${options.stock}, ${options.buyers} buyers` +
      (options.presses > 1 ? ` pressing ${options.presses} times each` : '') +
      `, ${options.connections} connections → ${urls.join(', ')}` +
      (started ? `\n${urls.length} instance(s) started here, orders in ${started.database}` : ''),
  );

  const latencies: number[] = [];
  const statuses = new Map<number, number>();
  let sent = 0;
  // One autocannon per instance, the connections and requests split evenly; one body per
  // request: buyer-0, buyer-1, … (each `presses` times in a row).
  const loads = urls.map((target, i) => {
    const load = autocannon({
      url: target,
      connections: Math.max(1, Math.round(options.connections / urls.length)),
      amount: Math.floor(requests / urls.length) + (i < requests % urls.length ? 1 : 0),
      timeout: 10,
      requests: [buyRequest(sku, () => `buyer-${Math.floor(sent++ / options.presses)}`)],
    });
    load.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
      latencies.push(ms);
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    });
    return load;
  });
  const results = await Promise.all(loads);
  const duration = Math.max(...results.map((r) => r.duration));
  const errors = results.reduce((n, r) => n + r.errors, 0);
  const timeouts = results.reduce((n, r) => n + r.timeouts, 0);

  const waitStart = Date.now();
  const sale = await waitForOrders(url, sku);
  const waitedMs = Date.now() - waitStart;
  const orders = await getJson<OrderRow[]>(url, `/flash-sales/${sku}/orders`);

  const ordersPerBuyer = new Map<string, number>();
  for (const order of orders) {
    ordersPerBuyer.set(order.userId, (ordersPerBuyer.get(order.userId) ?? 0) + 1);
  }
  const duplicateBuyers = [...ordersPerBuyer.values()].filter((n) => n > 1).length;
  const oversold = Math.max(0, sale.sold - options.stock, orders.length - options.stock);
  const accepted = statuses.get(202) ?? 0;
  const unexpected = [...statuses].filter(([code]) => !EXPECTED_STATUSES.has(code));
  const failures = [
    oversold > 0 && `${oversold} units oversold`,
    duplicateBuyers > 0 && `${duplicateBuyers} buyers got more than one order`,
    sale.pending > 0 && `${sale.pending} orders still queued after ${ORDERS_DEADLINE_MS} ms`,
    accepted !== sale.sold && `${accepted} purchases accepted but ${sale.sold} units sold`,
    unexpected.length > 0 && `unexpected answers: ${unexpected.map(([c, n]) => `${c} ×${n}`)}`,
    errors > 0 && `${errors} connection errors (${timeouts} timeouts)`,
  ].filter((f): f is string => typeof f === 'string');

  const responses = latencies.length;
  const codes = [...statuses]
    .sort(([a], [b]) => a - b)
    .map(([code, n]) => `${code}: ${n}`)
    .join('  ');
  const sorted = [...latencies].sort((a, b) => a - b);
  const rows = rowFigures(orders);
  console.log(
    [
      `requests          ${responses} in ${duration.toFixed(2)} s = ${Math.round(responses / duration)} requests/s`,
      `latency           p50 ${pct(sorted, 0.5)} ms   p99 ${pct(sorted, 0.99)} ms   max ${Math.round(sorted[sorted.length - 1] ?? 0)} ms`,
      `status codes      ${codes}   (202 bought, 409 bought already, 410 sold out, 423 lock wait ran out, 503 orders queue full)`,
      `units sold        ${sale.sold} of ${options.stock} (stock left ${sale.stock})` +
        (rows.sellRate === undefined
          ? ''
          : `, ${Math.round(rows.sellRate)} units/s at the hot key`),
      `orders created    ${orders.length} (the last one ${waitedMs} ms after the load ended)` +
        (rows.rowsPerSecond === undefined ? '' : `, ${Math.round(rows.rowsPerSecond)} rows/s`),
      `buy to order row  p50 ${rows.p50} ms   p99 ${rows.p99} ms   (from boughtAt to the row's createdAt)`,
      `503 answers       ${statuses.get(503) ?? 0}`,
      `oversold          ${oversold}`,
      `duplicate buyers  ${duplicateBuyers}`,
      `latency histogram`,
      latencyHistogram(latencies),
      failures.length === 0 ? 'OK' : `FAILED: ${failures.join('; ')}`,
    ].join('\n'),
  );
  process.exitCode = failures.length === 0 ? 0 : 1;
}

/** The `q` quantile of sorted values (nearest rank), 0 when there are none. */
function pct(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  return Math.round(sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]);
}

/**
 * From the rows: buy → row times (p50/p99, ms), rows written per second (first to last row) and
 * units sold per second at the hot key (first to last `boughtAt`).
 */
function rowFigures(orders: readonly OrderRow[]): {
  p50: number;
  p99: number;
  rowsPerSecond?: number;
  sellRate?: number;
} {
  const delays = orders
    .map((o) => Date.parse(o.createdAt) - Date.parse(o.boughtAt))
    .sort((a, b) => a - b);
  const created = orders.map((o) => Date.parse(o.createdAt)).sort((a, b) => a - b);
  const bought = orders.map((o) => Date.parse(o.boughtAt)).sort((a, b) => a - b);
  const per = (times: number[]) => {
    const span = (times[times.length - 1] - times[0]) / 1000;
    return times.length > 1 && span > 0 ? (times.length - 1) / span : undefined;
  };
  return {
    p50: pct(delays, 0.5),
    p99: pct(delays, 0.99),
    rowsPerSecond: per(created),
    sellRate: per(bought),
  };
}

async function createSale(url: string, sku: string, stock: number): Promise<void> {
  let response: Response;
  try {
    response = await fetch(`${url}/flash-sales`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sku, stock, price: 99 }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    const why =
      (err as Error).name === 'TimeoutError'
        ? `no answer within ${REQUEST_TIMEOUT_MS} ms`
        : ((err as Error).cause ?? err);
    throw new Error(
      `cannot reach the sample at ${url} (${why}): start it with ` +
        '`npm run sample` (or set SAMPLE_URL / --url)',
      { cause: err },
    );
  }
  if (response.status !== 201) {
    throw new Error(`POST /flash-sales answered ${response.status}: ${await response.text()}`);
  }
}

/** Polls the sale until no order is pending, or the deadline passes. */
async function waitForOrders(url: string, sku: string): Promise<SaleStatus> {
  const deadline = Date.now() + ORDERS_DEADLINE_MS;
  for (;;) {
    const sale = await getJson<SaleStatus>(url, `/flash-sales/${sku}`);
    if (sale.pending === 0 || Date.now() > deadline) return sale;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** GETs `path` and parses the JSON, within `REQUEST_TIMEOUT_MS` (body included). */
async function getJson<T>(url: string, path: string): Promise<T> {
  try {
    const response = await fetch(`${url}${path}`, {
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    if (!response.ok)
      throw new Error(`GET ${path} answered ${response.status}: ${await response.text()}`);
    return (await response.json()) as T;
  } catch (err) {
    if ((err as Error).name !== 'TimeoutError') throw err;
    throw new Error(`GET ${path} got no answer within ${REQUEST_TIMEOUT_MS} ms`, { cause: err });
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
