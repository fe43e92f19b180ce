import { Redis } from 'ioredis';
import type { LockLibrary } from '../adapters/lock-adapter';
import type { BenchConfig } from '../bench-config';
import { jainIndex, median, percentile } from '../support/bench-stats';
import { CpuMeter } from '../support/cpu-meter';
import { monotonicMs } from '../support/monotonic-clock';
import { uncountedClient } from '../support/request-counter';
import type { ContendedParams, ContendedReport } from './contended.child';
import type { ChildSetup } from '../support/bench-child';
import { benchKey, type Metrics, type Shape, type ShapeContext } from './shape';

/** Who fights for the key in one run of a contended or crowd shape. */
export interface Contenders {
  /** Shape id, for the keys. */
  shape: string;
  /** OS processes (the first of `ctx.children`). */
  processes: number;
  /** Concurrent callers in each process. */
  callers: number;
}

/**
 * Runs `contenders` on one key for `config.contendedMs`, each section holding the key about
 * `config.holdMs`. Metrics: see `summarizeContended`, plus `redisCpuUsPerSection` (the server's
 * CPU time, polling included).
 */
export async function runContenders(
  library: LockLibrary,
  ctx: ShapeContext,
  { shape, processes, callers }: Contenders,
): Promise<Metrics> {
  const { url, config } = ctx;
  const children = ctx.children.slice(0, processes);
  if (children.length < processes) {
    throw new Error(`${shape} needs ${processes} child processes, the run has ${children.length}`);
  }
  const base = benchKey(shape, library.id, ctx.round);
  const key = `${base}:lock`;
  const counterKey = `${base}:counter`;
  const setup: ChildSetup = { library: library.id, url, key, warmupPairs: config.warmupPairs };
  await Promise.all(children.map((c) => c.call('setup', setup)));
  try {
    const meter = await CpuMeter.start(url);
    const params: ContendedParams = {
      key,
      insideKey: `${base}:inside`,
      counterKey,
      // Every child has its adapter connected and warmed up; a short lead time lets the
      // messages arrive.
      startAt: monotonicMs() + 250,
      durationMs: config.contendedMs,
      holdMs: config.holdMs,
      callers,
    };
    const reports = await Promise.all(
      children.map((c) =>
        c.call<ContendedReport>('contended', params, config.contendedMs + 60_000),
      ),
    );
    const { redisUs } = await meter.stop();
    const admin = uncountedClient(new Redis(url));
    const counted = Number(await admin.get(counterKey));
    await admin.quit();
    const failureSample = reports.find((r) => r.failureSample)?.failureSample;
    if (failureSample) console.log(`    (a failed acquisition: ${failureSample.split('\n')[0]})`);
    const metrics = summarizeContended(reports, config.contendedMs, counted);
    metrics.redisCpuUsPerSection = redisUs / reports.reduce((a, r) => a + r.sections, 0);
    return metrics;
  } finally {
    await Promise.all(children.map((c) => c.call('teardown')));
  }
}

/**
 * Shape 3: `config.contendedProcesses` OS processes, one caller each, fight for one key for
 * `config.contendedMs`, each holding it about `holdMs` per section (see `runContenders`).
 */
export function contendedShape(config: BenchConfig): Shape<LockLibrary> {
  const { contendedProcesses: processes, contendedMs, holdMs } = config;
  const id = `contended-${processes}`;
  return {
    id,
    title:
      `contended-${processes}: ${processes} processes, one key, ~${holdMs} ms per section ` +
      `(${contendedMs / 1000} s)`,
    run: (library, ctx) =>
      runContenders(library, ctx, { shape: 'contended', processes, callers: 1 }),
  };
}

/**
 * The contended metrics of one run from the processes' reports:
 * - `handoffsPerSec`: sections released by the deadline, per second of `durationMs` (the
 *   drain-down after the deadline is not counted: it would favour whoever is slow to finish);
 * - `waitP50Ms`/`waitP99Ms`/`waitMaxMs`: acquire call to lock, or to giving up, over every
 *   attempt of every process (an attempt given up on is a wait too);
 * - `gaveUpAfterMs`: median wait of the attempts given up on (only when there were some);
 * - `jain`: fairness over per-process section counts; `jainCallers`: over per-caller section
 *   counts (the same as `jain` with one caller per process); `overlaps` (must be 0); `failures`;
 * - `counterMismatch`: Redis counter minus reported sections (must be 0);
 * - `requestsPerSection`: over every section, those after the deadline included.
 */
export function summarizeContended(
  reports: readonly ContendedReport[],
  durationMs: number,
  counted: number,
): Metrics {
  const sum = (of: (r: ContendedReport) => number) => reports.reduce((a, r) => a + of(r), 0);
  const sections = sum((r) => r.sections);
  const failed = reports.flatMap((r) => r.failedWaitsMs);
  const waits = [...reports.flatMap((r) => r.waitsMs), ...failed];
  const metrics: Metrics = {
    handoffsPerSec: (sum((r) => r.sectionsInWindow) / durationMs) * 1000,
    waitP50Ms: percentile(waits, 50),
    waitP99Ms: percentile(waits, 99),
    waitMaxMs: waits.length ? Math.max(...waits) : NaN,
    jain: jainIndex(reports.map((r) => r.sections)),
    jainCallers: jainIndex(reports.flatMap((r) => r.sectionsPerCaller)),
    overlaps: sum((r) => r.overlaps),
    failures: failed.length,
    counterMismatch: counted - sections,
    requestsPerSection: sum((r) => r.requests) / sections,
  };
  if (failed.length) metrics.gaveUpAfterMs = median(failed);
  return metrics;
}
