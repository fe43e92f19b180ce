import type { Agent } from 'node:http';
import type { BuyAccepted, OrderView } from '../../../sample/flash-sale/flash-sale.dto';
import { mapConcurrently, sendJson } from './sample-app';

/** What one buyer ended with: their order id (bought), or none, and every status they got. */
export interface BuyerOutcome {
  userId: string;
  orderId?: string;
  statuses: number[];
  /** Requests that got no HTTP answer (the instance died under them). */
  dropped: number;
}

/**
 * Buys one unit of `sku` for `userId` the way a real client does: at the instance `url()` names
 * (asked again before every attempt), retrying after a dropped connection, a 423 (the stock lock
 * wait ran out), a 503 (Redis or the queue said "later") or a 429 (the sample's per-user rate
 * limit: after its Retry-After), until it gets 202 (bought), 409
 * (bought before: the answer names the order, e.g. a retry after a dropped answer) or 410.
 */
export async function buyUntilAnswered(
  agent: Agent,
  url: () => string,
  sku: string,
  userId: string,
  maxAttempts = 40,
  onAnswer?: (status: number) => void,
): Promise<BuyerOutcome> {
  const outcome: BuyerOutcome = { userId, statuses: [], dropped: 0 };
  for (let attempt = 0; attempt < maxAttempts; attempt++) {
    let answer;
    try {
      answer = await sendJson<BuyAccepted>(agent, 'POST', `${url()}/flash-sales/${sku}/buy`, {
        userId,
      });
    } catch {
      outcome.dropped++;
      await new Promise((r) => setTimeout(r, 20));
      continue;
    }
    outcome.statuses.push(answer.status);
    onAnswer?.(answer.status);
    if (answer.status === 202 || answer.status === 409) {
      outcome.orderId = answer.body.orderId;
      return outcome;
    }
    if (answer.status === 423) continue; // the lock wait (2 s) was the pause
    if (answer.status === 503) {
      // As the answer asks (Retry-After: 1), at most 1 s.
      const seconds = Number(answer.headers['retry-after'] ?? 1);
      await new Promise((r) => setTimeout(r, Math.min(1, seconds) * 1_000));
      continue;
    }
    if (answer.status === 429) {
      // Past the sample's 5 presses per 10 s (many retries in a failover): as the answer asks.
      const seconds = Number(answer.headers['retry-after'] ?? 1);
      await new Promise((r) => setTimeout(r, Math.min(10, seconds) * 1_000));
      continue;
    }
    return outcome; // 410 sold out, or something unexpected (the test looks at `statuses`)
  }
  return outcome;
}

/**
 * `buyUntilAnswered` for every buyer, `concurrency` at a time; `onAnswer` sees the status of
 * every HTTP answer as it comes (e.g. to act at the n-th sale while the others still buy).
 */
export function buyAll(
  agent: Agent,
  url: (index: number) => string,
  sku: string,
  userIds: readonly string[],
  concurrency = 100,
  onAnswer?: (status: number) => void,
): Promise<BuyerOutcome[]> {
  return mapConcurrently(userIds, concurrency, (userId, i) =>
    buyUntilAnswered(agent, () => url(i), sku, userId, undefined, onAnswer),
  );
}

/** Follows every order to its end through `GET /orders/:id?waitMs=`; resolves with the views. */
export function followOrders(
  agent: Agent,
  url: string,
  orderIds: readonly string[],
  waitMs = 20_000,
): Promise<OrderView[]> {
  return mapConcurrently(orderIds, 50, async (orderId) => {
    const answer = await sendJson<OrderView>(
      agent,
      'GET',
      `${url}/orders/${orderId}?waitMs=${waitMs}`,
    );
    if (answer.status !== 200) {
      throw new Error(
        `GET /orders/${orderId} answered ${answer.status}: ${JSON.stringify(answer.body)}`,
      );
    }
    return answer.body;
  });
}

/** Counts the items of `values` by their value: `{ 202: 400, 410: 2100 }`. */
export function countBy<T extends string | number>(values: readonly T[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const v of values) counts[String(v)] = (counts[String(v)] ?? 0) + 1;
  return counts;
}
