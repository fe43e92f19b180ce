import type { RedactingLogger } from '../../redaction/redacting-logger';
import type { RedisLockConnection } from '../../redis/redis-connection';
import { ThrottledWarning } from '../../redis/throttled-warning';
import type { QueueMetricsPoint } from '../interfaces/queue-options.interface';
import type { QueueRedisKeys } from '../queue-keys';
import { QUEUE_SCRIPTS } from '../queue-scripts';

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
/** How long the history is kept: a day's key lives this long after its day ended. */
export const METRICS_KEEP_MS = 14 * DAY_MS;
/** Run times are counted in buckets 10 % apart (codes 1..255; 0: none). */
const CODE_BASE = Math.log(1.1);
const CODES = 256;

/** What is counted per queue and minute. */
export type MetricKind = 'completed' | 'failed' | 'dead' | 'expired' | 'cancelled';
const KINDS: readonly MetricKind[] = ['completed', 'failed', 'dead', 'expired', 'cancelled'];

/** The code of a run time: 1 + round(log(ms + 1) / log(1.1)), at most 255. */
export function runTimeCode(ms: number): number {
  return Math.min(CODES - 1, 1 + Math.round(Math.log(Math.max(0, ms) + 1) / CODE_BASE));
}

/** The run time a code stands for (ms, rounded), the middle of its bucket. */
export function runTimeOfCode(code: number): number {
  return Math.max(0, Math.round(Math.exp((code - 1) * CODE_BASE) - 1));
}

/** One minute of one queue, in this instance's memory until its flush. */
interface MinuteCounts {
  counts: number[];
  /** Completed tasks' run times, by code. */
  runTimes?: Uint32Array;
}

/** The key of a queue's history of UTC day `day` (days since the epoch). */
export function metricsDayKey(k: QueueRedisKeys, day: number): string {
  return `${k.metrics}:${day}`;
}

/**
 * The per-minute history of the queues (`QueueService.metrics`): completed, failed (retried),
 * dead, expired and cancelled tasks and completed tasks' run-time p50/p95. Each instance counts
 * its own in memory, per queue and minute (of its clock), and writes the minutes that ended once
 * a minute: one record-metrics.lua call per queue with activity, never one per task. A crash
 * loses the minute in progress (at most about one minute). Kept 14 days, in one string per queue
 * and UTC day (record-metrics.lua has the layout).
 */
export class QueueMetrics {
  /** Minutes not written yet: queue -> minute (epoch minute) -> counts. */
  private pending = new Map<string, Map<number, MinuteCounts>>();
  private timer?: NodeJS.Timeout;
  private inFlight?: Promise<void>;
  private readonly warning: ThrottledWarning;

  constructor(
    private readonly connection: RedisLockConnection,
    private readonly keysOf: (queue: string) => QueueRedisKeys,
    logger: RedactingLogger,
    private readonly now: () => number = Date.now,
  ) {
    this.warning = new ThrottledWarning(logger);
  }

  /** Counts `n` tasks of `queue` that ended as `kind` now (`runMs`: a completed task's). */
  count(queue: string, kind: MetricKind, n = 1, runMs?: number): void {
    if (n <= 0) return;
    const minute = Math.floor(this.now() / MINUTE_MS);
    let minutes = this.pending.get(queue);
    if (!minutes) this.pending.set(queue, (minutes = new Map()));
    let m = minutes.get(minute);
    if (!m) minutes.set(minute, (m = { counts: [0, 0, 0, 0, 0] }));
    m.counts[KINDS.indexOf(kind)] += n;
    if (runMs !== undefined) {
      m.runTimes ??= new Uint32Array(CODES);
      m.runTimes[runTimeCode(runMs)]++;
    }
    this.schedule();
  }

  /** Writes every minute that ended (all of them with `all`, at shutdown). */
  async flush(all = false): Promise<void> {
    if (this.inFlight) await this.inFlight;
    const current = all ? Infinity : Math.floor(this.now() / MINUTE_MS);
    const calls: Promise<void>[] = [];
    for (const [queue, minutes] of this.pending) {
      const ended = [...minutes.keys()].filter((minute) => minute < current);
      if (ended.length === 0) continue;
      const batch = ended.map((minute) => [minute, minutes.get(minute)!] as const);
      for (const minute of ended) minutes.delete(minute);
      if (minutes.size === 0) this.pending.delete(queue);
      calls.push(this.write(queue, batch));
    }
    this.inFlight = Promise.all(calls).then(() => undefined);
    await this.inFlight;
    this.inFlight = undefined;
  }

  /**
   * Drops the minutes of `queue` not written yet and waits for a write in flight (`obliterate`:
   * the history is deleted after this, and nothing of this instance writes it back).
   */
  async forget(queue: string): Promise<void> {
    this.pending.delete(queue);
    if (this.inFlight) await this.inFlight;
  }

  /** Writes what is left and stops the timer (shutdown). */
  async close(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.flush(true);
  }

  /**
   * The points of `queue` from `from` to `to` (epoch ms, minutes that started in that range),
   * one per minute with activity, oldest first.
   */
  async read(queue: string, from: number, to: number): Promise<QueueMetricsPoint[]> {
    const k = this.keysOf(queue);
    // The days kept (14, and a day on each side for clock skew between instances), within the
    // range: a `to` far in the future still reads them (the window counted back from `to` read
    // only days without data).
    const first = Math.floor(from / DAY_MS);
    const last = Math.min(Math.floor(to / DAY_MS), Math.floor(Date.now() / DAY_MS) + 1);
    const days: number[] = [];
    for (let day = Math.max(first, last - 16); day <= last; day++) days.push(day);
    // A range that starts after tomorrow: no day can hold data (and an MGET of no key is an error).
    if (days.length === 0) return [];
    const blobs = await this.connection.call('MGET (queue metrics)', (c) =>
      c.mgetBuffer(...days.map((day) => metricsDayKey(k, day))),
    );
    const points: QueueMetricsPoint[] = [];
    blobs.forEach((blob, i) => {
      if (!blob) return;
      for (const p of decodeDay(blob, days[i])) {
        if (p.time >= from && p.time <= to) points.push(p);
      }
    });
    return points;
  }

  /** One record-metrics.lua call for `queue`'s ended minutes. */
  private async write(
    queue: string,
    batch: readonly (readonly [number, MinuteCounts])[],
  ): Promise<void> {
    const k = this.keysOf(queue);
    const keys: string[] = [];
    const args: (string | number)[] = [METRICS_KEEP_MS];
    for (const [minute, m] of batch) {
      const day = Math.floor((minute * MINUTE_MS) / DAY_MS);
      const key = metricsDayKey(k, day);
      let index = keys.indexOf(key);
      if (index < 0) index = keys.push(key) - 1;
      const [p50, p95] = m.runTimes ? percentileCodes(m.runTimes) : [0, 0];
      args.push(index + 1, (day + 1) * DAY_MS, minute - day * 1440, ...m.counts, p50, p95);
    }
    try {
      await this.connection.run(QUEUE_SCRIPTS.recordMetrics, keys, args);
    } catch (err) {
      this.warning.warn(
        `queue '${queue}': writing its metrics failed (those minutes are lost): ${(err as Error).message}`,
      );
    }
  }

  /** Flushes once the current minute ended (one timer for every queue). */
  private schedule(): void {
    if (this.timer) return;
    const now = this.now();
    // A little after the minute boundary, so that the minute's last tasks are in.
    const wait = MINUTE_MS - (now % MINUTE_MS) + 100;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush().then(() => {
        if (this.pending.size > 0) this.schedule();
      });
    }, wait);
    this.timer.unref();
  }
}

/** p50 and p95 codes of a run-time histogram (by code). */
function percentileCodes(h: Uint32Array): [number, number] {
  let total = 0;
  for (const n of h) total += n;
  const at = (q: number): number => {
    const rank = Math.ceil(q * total);
    let seen = 0;
    for (let code = 0; code < h.length; code++) {
      seen += h[code];
      if (seen >= rank) return code;
    }
    return h.length - 1;
  };
  return [at(0.5), at(0.95)];
}

/** The points of one day's records (record-metrics.lua's layout). */
function decodeDay(blob: Buffer, day: number): QueueMetricsPoint[] {
  const points: QueueMetricsPoint[] = [];
  let i = 0;
  let minute = -1;
  const varint = (): number => {
    let v = 0;
    let shift = 0;
    for (;;) {
      const b = blob[i++];
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v;
      shift += 7;
    }
  };
  while (i < blob.length) {
    if (blob[i] & 0x80) {
      // A compact record: the next minute, completed tasks only, with their run times.
      minute++;
      points.push({
        time: day * DAY_MS + minute * MINUTE_MS,
        completed: ((blob[i] & 0x7f) << 8) | blob[i + 1],
        failed: 0,
        dead: 0,
        expired: 0,
        cancelled: 0,
        p50Ms: runTimeOfCode(blob[i + 2]),
        p95Ms: runTimeOfCode(blob[i + 3]),
      });
      i += 4;
      continue;
    }
    const flags = blob[i++];
    // Bit 6: the minute after the previous record's; else the minutes skipped come next.
    minute += 1 + (flags & 64 ? 0 : varint());
    const c = KINDS.map((_, bit) => ((flags >> bit) & 1 ? varint() : 0));
    let p50: number | undefined;
    let p95: number | undefined;
    if (flags & 32) {
      p50 = runTimeOfCode(blob[i]);
      p95 = runTimeOfCode(blob[i + 1]);
      i += 2;
    }
    points.push({
      time: day * DAY_MS + minute * MINUTE_MS,
      completed: c[0],
      failed: c[1],
      dead: c[2],
      expired: c[3],
      cancelled: c[4],
      ...(p50 === undefined ? {} : { p50Ms: p50, p95Ms: p95 }),
    });
  }
  return points;
}
