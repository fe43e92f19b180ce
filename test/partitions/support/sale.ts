import type { AppClient, AppEvent } from './app-client';
import { waitFor } from '../../support/helpers';

/** A flash sale: `workers` withLock loops per instance on one hot key. */
export interface Sale {
  key: string;
  ttlMs: number;
  waitMs: number;
  workers: number;
  holdMs: number;
}

/** Starts the sale's loops in every instance of `apps`. */
export async function sell(apps: readonly AppClient[], sale: Sale): Promise<void> {
  await Promise.all(apps.map((a) => a.request({ cmd: 'sell', ...sale })));
}

/** Stops the loops; resolves each instance's `done` (completed sales, errors by name). */
export function stopSelling(apps: readonly AppClient[]): Promise<AppEvent[]> {
  return Promise.all(apps.map((a) => a.request({ cmd: 'stop' }, 60_000)));
}

/** Sections entered by `app` at or after monotonic time `since`. */
export function salesSince(app: AppClient, since: number): number {
  return app.events.filter((e) => e.ev === 'enter' && e.t >= since).length;
}

/** Sections entered by all of `apps` from monotonic time `from` until `to`. */
export function salesIn(apps: readonly AppClient[], from: number, to: number): number {
  let n = 0;
  for (const a of apps)
    for (const e of a.events) if (e.ev === 'enter' && e.t >= from && e.t < to) n++;
  return n;
}

/** Waits until every instance entered `n` more sections than when called. */
export async function waitSales(
  apps: readonly AppClient[],
  n: number,
  timeoutMs = 30_000,
): Promise<void> {
  const since = Number(process.hrtime.bigint()) / 1e6;
  await waitFor(
    `${n} sales in every instance`,
    () => apps.every((a) => salesSince(a, since) >= n),
    timeoutMs,
    20,
  );
}
