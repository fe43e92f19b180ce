import type { Redis } from 'ioredis';
import type { LockAdapter } from '../adapters/lock-adapter';
import { monotonicMs, sleep, sleepUntil } from '../support/monotonic-clock';
import { requestCount } from '../support/request-counter';

/** What the orchestrator sends each contended process. */
export interface ContendedParams {
  /** The one lock key every process fights for. */
  key: string;
  /**
   * INCR'd on entering, DECR'd on leaving the section: a value above `capacity` is an overlap.
   */
  insideKey: string;
  /** How many may be inside at once (a semaphore's limit). @default 1 */
  capacity?: number;
  /** INCR'd once per section (a cross-check of the reported counts). */
  counterKey: string;
  /** Monotonic ms at which every process starts. */
  startAt: number;
  durationMs: number;
  /** Time each section holds the lock (after its INCRs), in ms. */
  holdMs: number;
  /** Concurrent callers in this process, each looping on the key (the crowd shapes). @default 1 */
  callers?: number;
}

/** What one contended process measured. */
export interface ContendedReport {
  /** Sections (acquisitions) completed, including those released after the deadline. */
  sections: number;
  /** `sections` per caller of this process (one entry per caller). */
  sectionsPerCaller: number[];
  /** Sections whose release finished by `startAt + durationMs` (what handoffs/s counts). */
  sectionsInWindow: number;
  /** Time from calling acquire to having the lock, per section, in ms. */
  waitsMs: number[];
  /**
   * Time from calling acquire to the library giving up, per acquisition it gave up on (e.g.
   * redlock after its default retries), in ms.
   */
  failedWaitsMs: number[];
  /** One failure message, to show what failed. */
  failureSample?: string;
  /** Sections that found another process inside. */
  overlaps: number;
  /** Redis requests sent by the library (the marker client is not counted). */
  requests: number;
}

/** A report of nothing yet: no sections, no waits, no requests. */
export function emptyContendedReport(): ContendedReport {
  return {
    sections: 0,
    sectionsPerCaller: [],
    sectionsInWindow: 0,
    waitsMs: [],
    failedWaitsMs: [],
    overlaps: 0,
    requests: 0,
  };
}

/**
 * One of the contended processes: from `startAt`, for `durationMs`, each of `callers` concurrent
 * callers loops acquire → INCR the inside marker and the counter (one MULTI) → sleep `holdMs` →
 * DECR the marker → release. An acquisition that started before the deadline is completed and
 * its wait recorded; its section counts in `sectionsInWindow` only when its release finished by
 * the deadline.
 */
export async function runContended(
  adapter: LockAdapter,
  marker: Redis,
  params: ContendedParams,
): Promise<ContendedReport> {
  const report = emptyContendedReport();
  await sleepUntil(params.startAt);
  const requestsBefore = requestCount();
  const end = params.startAt + params.durationMs;
  const caller = async (): Promise<number> => {
    let sections = 0;
    while (monotonicMs() < end) {
      const asked = monotonicMs();
      let lock: unknown;
      try {
        lock = await adapter.acquire(params.key);
      } catch (err) {
        report.failedWaitsMs.push(monotonicMs() - asked);
        report.failureSample ??= (err as Error).message;
        continue;
      }
      report.waitsMs.push(monotonicMs() - asked);
      const replies = await marker.multi().incr(params.insideKey).incr(params.counterKey).exec();
      if (Number(replies?.[0]?.[1]) > (params.capacity ?? 1)) report.overlaps++;
      await sleep(params.holdMs);
      await marker.decr(params.insideKey);
      await adapter.release(lock);
      sections++;
      if (monotonicMs() <= end) report.sectionsInWindow++;
    }
    return sections;
  };
  report.sectionsPerCaller = await Promise.all(Array.from({ length: params.callers ?? 1 }, caller));
  report.sections = report.sectionsPerCaller.reduce((a, b) => a + b, 0);
  report.requests = requestCount() - requestsBefore;
  return report;
}
