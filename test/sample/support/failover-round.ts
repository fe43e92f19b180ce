import { Agent } from 'node:http';
import type { OrderView } from '../../../sample/flash-sale/flash-sale.dto';
import { saleKeys } from '../../../sample/flash-sale/flash-sale-keys';
import type { SampleRedis } from '../../../sample/redis/sample-redis';
import { waitFor } from '../../support/helpers';
import { countBy } from './buyers';
import { queryRows } from './postgres';
import { mapConcurrently, sendJson } from './sample-app';

/** A flash sale with a Redis master killed mid-sale, as `runFailoverRound` runs it. */
export interface FailoverRoundSetup {
  /** The sample instances; buyer i buys at `urls[i % urls.length]`. */
  urls: readonly string[];
  /** The sample's own Redis client (any instance's), to read the sale's keys. */
  redis: SampleRedis;
  databaseUrl: string;
  sku: string;
  stock: number;
  buyers: number;
  /**
   * Kills a master mid-sale, lets a replica take over and restarts the killed node; resolves when
   * Redis has recovered (the moment the settling time is measured from).
   */
  fail: () => Promise<void>;
  /** How long after the recovery every unit must be settled. */
  settleWithinMs: number;
}

/** What one round ended with: the figures of docs/faults.md's failover table. */
export interface FailoverRoundReport {
  sku: string;
  /** Units ordered: rows written. */
  sold: number;
  /** Units that went back on sale (`released`), whether sold again afterwards or not. */
  returned: number;
  /** Units taken from the stock that are neither a row nor back in stock at the end. */
  stranded: number;
  /** Rows past the stock, buyers with two rows, rows of released orders, a negative stock. */
  oversold: number;
  /** From the recovery until every unit was settled, or `undefined` if not within the bound. */
  settledMs?: number;
  /** HTTP statuses of the buys (0: no answer). */
  statuses: Record<string, number>;
  /** Buys that got no HTTP answer, by the client's error message. */
  noAnswer: Record<string, number>;
  /** Buyers answered 202 whose order is not `created`. */
  acceptedNotCreated: number;
  /** Buyers answered 503 naming their order, by where that order ended (`created`, `released`). */
  unconfirmed: Record<string, number>;
}

/**
 * Opens a sale, sends one buy per buyer (buyers who do NOT retry: whatever the answer, they are
 * done), kills a Redis master once a quarter of the stock is sold (`fail`), and after the
 * recovery waits until every unit taken is settled: stock + rows = the initial stock, nothing
 * held. Then counts what ended where. Every buy has a connection of its own (no keep-alive): a
 * kept socket left idle past the server's keep-alive timeout can be closed by the server just as
 * a buyer sends on it, and a buyer who does not retry would count that as no answer.
 */
export async function runFailoverRound(setup: FailoverRoundSetup): Promise<FailoverRoundReport> {
  const agent = new Agent({ keepAlive: false, maxSockets: 100 });
  try {
    return await round(setup, agent);
  } finally {
    agent.destroy();
  }
}

async function round(setup: FailoverRoundSetup, agent: Agent): Promise<FailoverRoundReport> {
  const { urls, redis, databaseUrl, sku, stock } = setup;
  const k = saleKeys(redis.prefix, sku);
  await waitFor(
    `sale '${sku}' opened`,
    async () => {
      const body = { sku, stock, price: 10 };
      const opened = await sendJson(agent, 'POST', `${urls[0]}/flash-sales`, body);
      return opened.status === 201;
    },
    30_000,
    200,
  );
  const sold = async () => Number((await redis.client.hget(k.sale, 'sold')) ?? 0);
  const ids = Array.from({ length: setup.buyers }, (_, i) => `${sku}-buyer-${i}`);
  const selling = mapConcurrently(ids, 100, async (userId, i) => {
    const url = `${urls[i % urls.length]}/flash-sales/${sku}/buy`;
    try {
      const answer = await sendJson(agent, 'POST', url, { userId });
      return { status: answer.status, orderId: answer.body?.orderId as string | undefined };
    } catch (err) {
      return { status: 0, orderId: undefined, error: (err as Error).message };
    }
  });
  await waitFor('a quarter sold', async () => (await sold()) >= stock / 4, 60_000, 10);
  await setup.fail();
  const recoveredAt = Date.now();
  const answers = await selling;

  const rowCount = async () =>
    (
      await queryRows<{ n: number }>(
        databaseUrl,
        'SELECT count(*)::int AS n FROM orders WHERE sku = $1',
        [sku],
      )
    )[0].n;
  const left = async () => Number(await redis.client.hget(k.sale, 'stock'));
  let settledMs: number | undefined;
  await waitFor(
    'every unit settled',
    async () => {
      const [rows, inStock, held] = await Promise.all([
        rowCount(),
        left(),
        redis.client.zcard(k.holds),
      ]).catch(() => [0, 0, 1]);
      if (rows + inStock !== stock || held !== 0) return false;
      settledMs = Date.now() - recoveredAt;
      return true;
    },
    setup.settleWithinMs,
    100,
  ).catch(() => undefined);

  const [[counts], inStock, releasedIds] = await Promise.all([
    queryRows<{ rows: number; buyers: number }>(
      databaseUrl,
      'SELECT count(*)::int AS rows, count(DISTINCT user_id)::int AS buyers FROM orders WHERE sku = $1',
      [sku],
    ),
    left(),
    redis.client.hkeys(k.released),
  ]);
  const [{ n: rowsOfReleased }] = await queryRows<{ n: number }>(
    databaseUrl,
    'SELECT count(*)::int AS n FROM orders WHERE order_id = ANY($1::text[])',
    [releasedIds],
  );
  const stateOf = async (orderId: string) => {
    const view = await sendJson<OrderView>(agent, 'GET', `${urls[0]}/orders/${orderId}`);
    return view.status === 200 ? view.body.state : String(view.status);
  };
  const accepted = answers.filter((a) => a.status === 202);
  const acceptedStates = await mapConcurrently(accepted, 20, (a) => stateOf(a.orderId!));
  const told = answers.filter((a) => a.status === 503 && a.orderId !== undefined);
  const toldStates = await mapConcurrently(told, 20, (a) => stateOf(a.orderId!));
  return {
    sku,
    sold: counts.rows,
    returned: releasedIds.length,
    stranded: Math.max(0, stock - inStock - counts.rows),
    oversold:
      Math.max(0, counts.rows - stock) +
      Math.max(0, -inStock) +
      (counts.rows - counts.buyers) +
      rowsOfReleased,
    settledMs,
    statuses: countBy(answers.map((a) => a.status)),
    noAnswer: countBy(answers.flatMap((a) => (a.error === undefined ? [] : [a.error]))),
    acceptedNotCreated: acceptedStates.filter((s) => s !== 'created').length,
    unconfirmed: countBy(toldStates),
  };
}

/** The rounds as a markdown table (docs/faults.md). */
export function failoverTable(
  rounds: ReadonlyArray<{ kind: string } & FailoverRoundReport>,
): string {
  const lines = [
    '| round | master killed | sold | returned | stranded | oversold | settled after recovery | 202 / 503 (told: created, released) |',
    '| ----- | ------------- | ---- | -------- | -------- | -------- | ---------------------- | ----------------------------------- |',
  ];
  rounds.forEach((r, i) => {
    const settled =
      r.settledMs === undefined ? 'not settled' : `${(r.settledMs / 1000).toFixed(1)} s`;
    const told = `${r.unconfirmed.created ?? 0}, ${r.unconfirmed.released ?? 0}`;
    lines.push(
      `| ${i + 1} | ${r.kind} | ${r.sold} | ${r.returned} | ${r.stranded} | ${r.oversold} | ${settled} | ${r.statuses['202'] ?? 0} / ${r.statuses['503'] ?? 0} (${told}) |`,
    );
  });
  return lines.join('\n');
}
