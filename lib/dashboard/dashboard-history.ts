import { QueueError } from '../errors/queue.error';
import type { QueueService } from '../queue/queue.service';

/** The ranges of the history charts: their length and the width of one point, in ms. */
export const HISTORY_RANGES = {
  '1h': { ms: 3_600_000, stepMs: 60_000 },
  '24h': { ms: 86_400_000, stepMs: 600_000 },
  '14d': { ms: 14 * 86_400_000, stepMs: 3_600_000 },
} as const;

/**
 * A queue's history for one chart (`GET api/queues/:queue/history?range=1h|24h|14d`), from
 * `QueueService.metrics`: one point per step (a minute, 10 minutes, an hour), oldest first, every
 * step of the range present (0 when nothing ended). A point's p50/p95 is the mean of its minutes',
 * weighted by completed tasks; `null` when none completed.
 */
export interface DashboardHistory {
  range: keyof typeof HISTORY_RANGES;
  stepMs: number;
  /** Start of each step (epoch ms). */
  time: number[];
  completed: number[];
  failed: number[];
  dead: number[];
  expired: number[];
  cancelled: number[];
  p50Ms: (number | null)[];
  p95Ms: (number | null)[];
}

/** The history of `queue` over `range` (`'1h'`, `'24h'` or `'14d'`), summed per step. */
export async function queueHistory(
  queues: Pick<QueueService, 'metrics'>,
  queue: string,
  range: string,
): Promise<DashboardHistory> {
  if (!Object.prototype.hasOwnProperty.call(HISTORY_RANGES, range)) {
    throw QueueError.invalid(
      'range',
      range,
      `one of '${Object.keys(HISTORY_RANGES).join("', '")}'`,
    );
  }
  const r = range as keyof typeof HISTORY_RANGES;
  const { ms, stepMs } = HISTORY_RANGES[r];
  const now = Date.now();
  const first = now - (now % stepMs) - ms + stepMs;
  const steps = ms / stepMs;
  const h: DashboardHistory = {
    range: r,
    stepMs,
    time: Array.from({ length: steps }, (_, i) => first + i * stepMs),
    completed: new Array<number>(steps).fill(0),
    failed: new Array<number>(steps).fill(0),
    dead: new Array<number>(steps).fill(0),
    expired: new Array<number>(steps).fill(0),
    cancelled: new Array<number>(steps).fill(0),
    p50Ms: new Array<number | null>(steps).fill(null),
    p95Ms: new Array<number | null>(steps).fill(null),
  };
  const weighted = new Array<number>(steps).fill(0);
  for (const p of await queues.metrics(queue, { from: first, to: now })) {
    const i = Math.floor((p.time - first) / stepMs);
    if (i < 0 || i >= steps) continue;
    for (const kind of ['completed', 'failed', 'dead', 'expired', 'cancelled'] as const) {
      h[kind][i] += p[kind];
    }
    if (p.p50Ms === undefined || p.completed === 0) continue;
    const w = weighted[i] + p.completed;
    h.p50Ms[i] = Math.round(((h.p50Ms[i] ?? 0) * weighted[i] + p.p50Ms * p.completed) / w);
    h.p95Ms[i] = Math.round(((h.p95Ms[i] ?? 0) * weighted[i] + p.p95Ms! * p.completed) / w);
    weighted[i] = w;
  }
  return h;
}
