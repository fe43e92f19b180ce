import type { Redis } from 'ioredis';
import type { LockAdapter } from '../adapters/lock-adapter';
import { monotonicMs, sleep, sleepUntil } from '../support/monotonic-clock';
import { requestCount } from '../support/request-counter';

/** What the orchestrator sends each contended process. */
export interface ContendedParams {
  /** The one lock key every process fights for. */
  key: string;
  /** INCR'd on entering, DECR'd on leaving the section: a value above 1 is an overlap. */
  insideKey: string;
  /** INCR'd once per section (a cross-check of the reported counts). */
  counterKey: string;
  /** Monotonic ms at which every process starts. */
  startAt: number;
  durationMs: number;
  /** Time each section holds the lock (after its INCRs), in ms. */
  holdMs: number;
}

/** What one contended process measured. */
export interface ContendedReport {
  /** Sections (acquisitions) completed. */
  sections: number;
  /** Time from calling acquire to having the lock, per section, in ms. */
  waitsMs: number[];
  /** Acquisitions the library gave up on (e.g. redlock after its default retries). */
  failures: number;
  /** One failure message, to show what failed. */
  failureSample?: string;
  /** Sections that found another process inside. */
  overlaps: number;
  /** Redis requests sent by the library (the marker client is not counted). */
  requests: number;
  /** Monotonic ms when the process finished its last section. */
  finishedAt: number;
}

/**
 * One of the contended processes: from `startAt`, for `durationMs`, loops acquire → INCR the
 * inside marker and the counter (one MULTI) → sleep `holdMs` → DECR the marker → release.
 * An acquisition that started before the deadline is completed and counted.
 */
export async function runContended(
  adapter: LockAdapter,
  marker: Redis,
  params: ContendedParams,
): Promise<ContendedReport> {
  const report: ContendedReport = {
    sections: 0,
    waitsMs: [],
    failures: 0,
    overlaps: 0,
    requests: 0,
    finishedAt: 0,
  };
  await sleepUntil(params.startAt);
  const requestsBefore = requestCount();
  const end = params.startAt + params.durationMs;
  while (monotonicMs() < end) {
    const asked = monotonicMs();
    let lock: unknown;
    try {
      lock = await adapter.acquire(params.key);
    } catch (err) {
      report.failures++;
      report.failureSample ??= (err as Error).message;
      continue;
    }
    report.waitsMs.push(monotonicMs() - asked);
    const replies = await marker.multi().incr(params.insideKey).incr(params.counterKey).exec();
    if (Number(replies?.[0]?.[1]) > 1) report.overlaps++;
    await sleep(params.holdMs);
    await marker.decr(params.insideKey);
    await adapter.release(lock);
    report.sections++;
  }
  report.finishedAt = monotonicMs();
  report.requests = requestCount() - requestsBefore;
  return report;
}
