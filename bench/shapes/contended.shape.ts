import { Redis } from 'ioredis';
import type { LockLibrary } from '../adapters/lock-adapter';
import type { BenchConfig } from '../bench-config';
import { jainIndex, median, percentile } from '../support/bench-stats';
import { CpuMeter } from '../support/cpu-meter';
import { monotonicMs } from '../support/monotonic-clock';
import { uncountedClient } from '../support/request-counter';
import type { ContendedReport } from './contended.child';
import type { ChildSetup } from '../support/bench-child';
import { benchKey, type Metrics, type Shape } from './shape';

/**
 * Shape 3: `config.contendedProcesses` OS processes fight for one key for `config.contendedMs`,
 * each holding it about `holdMs` per section. Metrics: see `summarizeContended`, plus
 * `redisCpuUsPerSection` (the server's CPU time, polling included).
 */
export function contendedShape(config: BenchConfig): Shape<LockLibrary> {
  const { contendedProcesses: processes, contendedMs, holdMs } = config;
  return {
    id: `contended-${processes}`,
    title:
      `contended-${processes}: ${processes} processes, one key, ~${holdMs} ms per section ` +
      `(${contendedMs / 1000} s)`,
    async run(library, ctx) {
      const { children, url } = ctx;
      const base = benchKey('contended', library.id, ctx.round);
      const key = `${base}:lock`;
      const insideKey = `${base}:inside`;
      const counterKey = `${base}:counter`;
      const setup: ChildSetup = {
        library: library.id,
        url,
        key,
        warmupPairs: ctx.config.warmupPairs,
      };
      await Promise.all(children.map((c) => c.call('setup', setup)));
      try {
        const meter = await CpuMeter.start(url);
        // Every child has its adapter connected and warmed up; a short lead time lets the
        // messages arrive.
        const startAt = monotonicMs() + 250;
        const params = { key, insideKey, counterKey, startAt, durationMs: contendedMs, holdMs };
        const reports = await Promise.all(
          children.map((c) => c.call<ContendedReport>('contended', params, contendedMs + 60_000)),
        );
        const { redisUs } = await meter.stop();
        const admin = uncountedClient(new Redis(url));
        const counted = Number(await admin.get(counterKey));
        await admin.quit();
        const failureSample = reports.find((r) => r.failureSample)?.failureSample;
        if (failureSample)
          console.log(`    (a failed acquisition: ${failureSample.split('\n')[0]})`);
        const metrics = summarizeContended(reports, contendedMs, counted);
        metrics.redisCpuUsPerSection = redisUs / reports.reduce((a, r) => a + r.sections, 0);
        return metrics;
      } finally {
        await Promise.all(children.map((c) => c.call('teardown')));
      }
    },
  };
}

/**
 * The contended metrics of one run from the processes' reports:
 * - `handoffsPerSec`: sections released by the deadline, per second of `durationMs` (the
 *   drain-down after the deadline is not counted: it would favour whoever is slow to finish);
 * - `waitP50Ms`/`waitP99Ms`/`waitMaxMs`: acquire call to lock, or to giving up, over every
 *   attempt of every process (an attempt given up on is a wait too);
 * - `gaveUpAfterMs`: median wait of the attempts given up on (only when there were some);
 * - `jain`: fairness over per-process section counts; `overlaps` (must be 0); `failures`;
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
    overlaps: sum((r) => r.overlaps),
    failures: failed.length,
    counterMismatch: counted - sections,
    requestsPerSection: sum((r) => r.requests) / sections,
  };
  if (failed.length) metrics.gaveUpAfterMs = median(failed);
  return metrics;
}
