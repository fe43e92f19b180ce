// `npm run sample:load`: fires a flash sale at the running sample (npm run sample) with
// autocannon, waits until the orders queue has created every order, checks the outcome and
// prints it. Exits 1 when anything was oversold, duplicated or left unexplained.
// Options: --stock 100 --buyers 5000 --connections 200 --presses 1 --url http://127.0.0.1:3000
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import type { Order, SaleStatus } from '../flash-sale/flash-sale.dto';
import { buyRequest } from './buy-request';
import { latencyHistogram } from './latency-histogram';
import { loadOptions, type LoadOptions } from './load-options';

/** Answers a buy may get under load: bought, already bought, sold out, lock wait ran out. */
const EXPECTED_STATUSES = new Set([202, 409, 410, 423]);
/** How long to wait for the workers to create the orders of the units sold. */
const ORDERS_DEADLINE_MS = 60_000;
/**
 * Bound of each request besides the load itself (opening the sale, polling it, reading the
 * orders), so that a sample that stops answering can't stall the run past its deadline.
 */
const REQUEST_TIMEOUT_MS = 5_000;

async function main(): Promise<void> {
  const options = loadOptions(process.argv.slice(2), process.env);
  const sku = `load-${randomBytes(3).toString('hex')}`;
  await createSale(options, sku);
  const requests = options.buyers * options.presses;
  console.log(
    `flash sale '${sku}': stock ${options.stock}, ${options.buyers} buyers` +
      (options.presses > 1 ? ` pressing ${options.presses} times each` : '') +
      `, ${options.connections} connections → ${options.url}`,
  );

  const latencies: number[] = [];
  const statuses = new Map<number, number>();
  let sent = 0;
  const load = autocannon({
    url: options.url,
    connections: options.connections,
    amount: requests,
    timeout: 10,
    // One body per request: buyer-0, buyer-1, … (each `presses` times in a row).
    requests: [buyRequest(sku, () => `buyer-${Math.floor(sent++ / options.presses)}`)],
  });
  load.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    latencies.push(ms);
    statuses.set(status, (statuses.get(status) ?? 0) + 1);
  });
  const result = await load;

  const waitStart = Date.now();
  const sale = await waitForOrders(options, sku);
  const waitedMs = Date.now() - waitStart;
  const orders = await getJson<Order[]>(options, `/flash-sales/${sku}/orders`);

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
    result.errors > 0 && `${result.errors} connection errors (${result.timeouts} timeouts)`,
  ].filter((f): f is string => typeof f === 'string');

  const responses = latencies.length;
  const codes = [...statuses]
    .sort(([a], [b]) => a - b)
    .map(([code, n]) => `${code}: ${n}`)
    .join('  ');
  console.log(
    [
      `requests          ${responses} in ${result.duration.toFixed(2)} s = ${Math.round(responses / result.duration)} requests/s`,
      `latency           p50 ${result.latency.p50} ms   p99 ${result.latency.p99} ms   max ${result.latency.max} ms`,
      `status codes      ${codes}   (202 bought, 409 bought already, 410 sold out, 423 lock wait ran out)`,
      `units sold        ${sale.sold} of ${options.stock} (stock left ${sale.stock})`,
      `orders created    ${orders.length} (the last one ${waitedMs} ms after the load ended)`,
      `oversold          ${oversold}`,
      `duplicate buyers  ${duplicateBuyers}`,
      `latency histogram`,
      latencyHistogram(latencies),
      failures.length === 0 ? 'OK' : `FAILED: ${failures.join('; ')}`,
    ].join('\n'),
  );
  process.exitCode = failures.length === 0 ? 0 : 1;
}

async function createSale(options: LoadOptions, sku: string): Promise<void> {
  let response: Response;
  try {
    response = await fetch(`${options.url}/flash-sales`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sku, stock: options.stock, price: 99 }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    const why =
      (err as Error).name === 'TimeoutError'
        ? `no answer within ${REQUEST_TIMEOUT_MS} ms`
        : ((err as Error).cause ?? err);
    throw new Error(
      `cannot reach the sample at ${options.url} (${why}): start it with ` +
        '`npm run sample` (or set SAMPLE_URL / --url)',
      { cause: err },
    );
  }
  if (response.status !== 201) {
    throw new Error(`POST /flash-sales answered ${response.status}: ${await response.text()}`);
  }
}

/** Polls the sale until no order is pending, or the deadline passes. */
async function waitForOrders(options: LoadOptions, sku: string): Promise<SaleStatus> {
  const deadline = Date.now() + ORDERS_DEADLINE_MS;
  for (;;) {
    const sale = await getJson<SaleStatus>(options, `/flash-sales/${sku}`);
    if (sale.pending === 0 || Date.now() > deadline) return sale;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** GETs `path` and parses the JSON, within `REQUEST_TIMEOUT_MS` (body included). */
async function getJson<T>(options: LoadOptions, path: string): Promise<T> {
  try {
    const response = await fetch(`${options.url}${path}`, {
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
