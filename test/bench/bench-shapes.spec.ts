import { FULL_CONFIG, QUICK_CONFIG, shapeTimeoutMs } from '../../bench/bench-config';
import { benchShapes } from '../../bench/shapes/bench-shapes';
import { emptyContendedReport, type ContendedReport } from '../../bench/shapes/contended.child';
import { summarizeContended } from '../../bench/shapes/contended.shape';
import { parseRedisBenchmarkCsv } from '../../bench/shapes/physical-floor.shape';
import { derivedMetrics } from '../../bench/support/derived-metrics';

/** A contended report with defaults for what a case does not care about. */
function report(part: Partial<ContendedReport>): ContendedReport {
  return { ...emptyContendedReport(), ...part };
}

describe('bench config', () => {
  it('quick mode changes only what it lists and inherits the rest from the full run', () => {
    expect(QUICK_CONFIG.mode).toBe('quick');
    expect(QUICK_CONFIG.contendedProcesses).toBe(FULL_CONFIG.contendedProcesses);
    expect(QUICK_CONFIG.producers).toBe(FULL_CONFIG.producers);
    expect(QUICK_CONFIG.roundTripProbeMs).toBe(FULL_CONFIG.roundTripProbeMs);
    expect(QUICK_CONFIG.throughputMs).toBeLessThan(FULL_CONFIG.throughputMs);
  });

  it('bounds each shape by its longest measured stretch plus a minute', () => {
    expect(shapeTimeoutMs(FULL_CONFIG)).toBe(
      FULL_CONFIG.handoffRounds * FULL_CONFIG.handoffDelayMs[1] + 60_000,
    );
    expect(shapeTimeoutMs({ ...FULL_CONFIG, contendedMs: 30_000 })).toBe(90_000);
  });
});

describe('bench shapes', () => {
  it('build their ids and titles from the config', () => {
    const shapes = benchShapes({
      ...FULL_CONFIG,
      parallelLoops: 16,
      contendedProcesses: 4,
      contendedMs: 2_000,
      producers: 10,
      queueJobs: 2_500,
      drainConcurrency: [5],
    });
    expect(shapes.parallel.id).toBe('parallel-16');
    expect(shapes.parallel.title).toContain('16 concurrent loops');
    expect(shapes.contended.id).toBe('contended-4');
    expect(shapes.contended.title).toContain('4 processes');
    expect(shapes.contended.title).toContain('(2 s)');
    expect(shapes.enqueue.title).toContain('10 concurrent producers');
    expect(shapes.enqueue.title).toContain('2,500 jobs');
    expect(shapes.drain.map((s) => s.id)).toEqual(['drain-5']);
    expect(shapes.lock.map((s) => s.id)).toEqual([
      'serial',
      'parallel-16',
      'contended-4',
      'handoff',
    ]);
  });
});

describe('physical floor: redis-benchmark output', () => {
  // As printed by redis-benchmark 7.0 with --csv.
  const csv =
    '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",' +
    '"p99_latency_ms","max_latency_ms"\n' +
    '"SET","48780.49","0.020","0.016","0.023","0.023","0.039","0.103"\n';

  it('reads rps, p50 and p99 by column name', () => {
    expect(parseRedisBenchmarkCsv(csv)).toEqual({
      requestsPerSec: 48780.49,
      p50Ms: 0.023,
      p99Ms: 0.039,
    });
  });

  it('throws on output without the SET row or a column', () => {
    expect(() => parseRedisBenchmarkCsv('"test","rps"\n"GET","1"\n')).toThrow(
      /unexpected redis-benchmark output/,
    );
    expect(() => parseRedisBenchmarkCsv('"test","rps"\n"SET","1"\n')).toThrow(
      /unexpected redis-benchmark output/,
    );
  });
});

describe('contended summary', () => {
  it('counts only sections released by the deadline, per second of the window', () => {
    const metrics = summarizeContended(
      [
        report({ sections: 11, sectionsInWindow: 10 }),
        report({ sections: 11, sectionsInWindow: 10 }),
      ],
      2_000,
      22,
    );
    expect(metrics.handoffsPerSec).toBe(10);
    expect(metrics.counterMismatch).toBe(0);
    expect(metrics.jain).toBe(1);
  });

  it('takes wait percentiles over every attempt, the given-up ones included', () => {
    const fast = Array.from({ length: 98 }, () => 0.1);
    const metrics = summarizeContended(
      [
        report({
          sections: 98,
          sectionsInWindow: 98,
          waitsMs: fast,
          failedWaitsMs: [2_200, 2_400],
        }),
      ],
      1_000,
      98,
    );
    expect(metrics.waitP50Ms).toBe(0.1);
    expect(metrics.waitP99Ms).toBe(2_200);
    expect(metrics.waitMaxMs).toBe(2_400);
    expect(metrics.failures).toBe(2);
    expect(metrics.gaveUpAfterMs).toBe(2_300);
  });

  it('reports no give-up time when nothing was given up', () => {
    const metrics = summarizeContended([report({ sections: 1, waitsMs: [1] })], 1_000, 1);
    expect(metrics.failures).toBe(0);
    expect(metrics).not.toHaveProperty('gaveUpAfterMs');
  });
});

describe('derived metrics', () => {
  it('serial: one pair in round trips measured right before the window', () => {
    expect(derivedMetrics('serial', { pairsPerSec: 5_000, roundTripMs: 0.1 })).toEqual({
      roundTrips: 2,
    });
  });

  it('handoff: p50 in round trips and above the pub/sub floor', () => {
    const derived = derivedMetrics('handoff', { p50Ms: 0.8, roundTripMs: 0.05 }, 0.5);
    expect(derived!.roundTrips).toBeCloseTo(16, 10);
    expect(derived!.overPubSubMs).toBeCloseTo(0.3, 10);
  });

  it('derives nothing for other shapes or without a measured round trip', () => {
    expect(derivedMetrics('parallel-64', { pairsPerSec: 1, roundTripMs: 1 })).toBeUndefined();
    expect(derivedMetrics('serial', { pairsPerSec: 1 })).toBeUndefined();
  });
});
