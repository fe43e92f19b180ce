import { Redis } from 'ioredis';
import type { LockLibrary } from '../adapters/lock-adapter';
import { jainIndex, percentile } from '../support/bench-stats';
import { CpuMeter } from '../support/cpu-meter';
import { monotonicMs } from '../support/monotonic-clock';
import { uncountedClient } from '../support/request-counter';
import type { ContendedReport } from './contended.child';
import { benchKey, type Metrics, type Shape } from './shape';

/**
 * Shape 3: `config.contendedProcesses` OS processes fight for one key for `config.contendedMs`,
 * each holding it about `holdMs` per section. Metrics: `handoffsPerSec` (sections per second over
 * all processes, up to the last one finishing), `waitP50Ms`/`waitP99Ms`/`waitMaxMs` (acquire
 * call to lock, successful acquisitions of every process), `jain` (fairness over per-process
 * section counts), `overlaps` (sections that found another process inside: must be 0),
 * `failures` (acquisitions the library gave up on), `counterMismatch` (Redis counter minus
 * reported sections: must be 0), `requestsPerSection`, `redisCpuUsPerSection` (the server's CPU
 * time, polling included).
 */
export const contendedShape: Shape<LockLibrary> = {
  id: 'contended-8',
  title: 'contended-8: 8 processes, one key, ~1 ms per section',
  async run(library, ctx) {
    const { config, children, url } = ctx;
    const base = benchKey('contended', library.id, ctx.round);
    const insideKey = `${base}:inside`;
    const counterKey = `${base}:counter`;
    await Promise.all(children.map((c) => c.call('setup', { library: library.id, url })));
    try {
      const meter = await CpuMeter.start(url);
      // Every child has its adapter connected; a short lead time lets the messages arrive.
      const startAt = monotonicMs() + 250;
      const reports = await Promise.all(
        children.map((c) =>
          c.call<ContendedReport>(
            'contended',
            {
              key: `${base}:lock`,
              insideKey,
              counterKey,
              startAt,
              durationMs: config.contendedMs,
              holdMs: config.holdMs,
            },
            config.contendedMs + 60_000,
          ),
        ),
      );
      const { redisUs } = await meter.stop();
      const admin = uncountedClient(new Redis(url));
      const counted = Number(await admin.get(counterKey));
      await admin.quit();
      const metrics = summarize(reports, startAt, counted);
      metrics.redisCpuUsPerSection = redisUs / reports.reduce((a, r) => a + r.sections, 0);
      return metrics;
    } finally {
      await Promise.all(children.map((c) => c.call('teardown')));
    }
  },
};

function summarize(reports: ContendedReport[], startAt: number, counted: number): Metrics {
  const sections = reports.reduce((a, r) => a + r.sections, 0);
  const waits = reports.flatMap((r) => r.waitsMs);
  const elapsedMs = Math.max(...reports.map((r) => r.finishedAt)) - startAt;
  const failureSample = reports.find((r) => r.failureSample)?.failureSample;
  if (failureSample) console.log(`    (a failed acquisition: ${failureSample.split('\n')[0]})`);
  return {
    handoffsPerSec: (sections / elapsedMs) * 1000,
    waitP50Ms: percentile(waits, 50),
    waitP99Ms: percentile(waits, 99),
    waitMaxMs: waits.length ? Math.max(...waits) : NaN,
    jain: jainIndex(reports.map((r) => r.sections)),
    overlaps: reports.reduce((a, r) => a + r.overlaps, 0),
    failures: reports.reduce((a, r) => a + r.failures, 0),
    counterMismatch: counted - sections,
    requestsPerSection: reports.reduce((a, r) => a + r.requests, 0) / sections,
  };
}
