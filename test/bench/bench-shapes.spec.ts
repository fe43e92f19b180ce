import { FULL_CONFIG, QUICK_CONFIG, shapeTimeoutMs } from '../../bench/bench-config';
import { benchShapes } from '../../bench/shapes/bench-shapes';
import { emptyContendedReport, type ContendedReport } from '../../bench/shapes/contended.child';
import { summarizeContended } from '../../bench/shapes/contended.shape';
import type { OrderRow, SaleStatus } from '../../sample/flash-sale/flash-sale.dto';
import { rowTimes, sellRate, summarizeFlashSale } from '../../bench/shapes/flash-sale.shape';
import type { ParkReport } from '../../bench/shapes/parked.child';
import { summarizeParked } from '../../bench/shapes/parked.shape';
import { parseRedisBenchmarkCsv } from '../../bench/shapes/physical-floor.shape';
import { derivedMetrics } from '../../bench/support/derived-metrics';
import {
  filterNote,
  parseRunFilter,
  selectedLibraries,
  shapeSelected,
} from '../../bench/support/run-filter';

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
      'distinct-keys',
      'contended-4',
      'handoff',
      'wake',
      'crowd-4x64',
      'crowd-8x16',
      'parked-1000',
      'parked-10000',
    ]);
    expect(shapes.wake.title).toContain('after 20 ms (150 handoffs per round');
    expect(shapes.crowd[0].title).toContain('4 processes × 64 concurrent callers');
    expect(shapes.parked[1].title).toContain('10,000 waiters over 4 processes');
    expect(shapes.flashSale.title).toContain('stock 2,000, 12,000 buyers, 300 connections');
  });

  it('bound a parked run by its hold and drain cut-off rather than the common timeout', () => {
    const [parked] = benchShapes(FULL_CONFIG).parked;
    expect(parked.timeoutMs).toBe(
      FULL_CONFIG.parkedHoldMs + FULL_CONFIG.parkedDrainCapMs + 120_000,
    );
    expect(benchShapes(FULL_CONFIG).serial.timeoutMs).toBeUndefined();
  });

  it('quick mode runs a small version of each crowd-load shape', () => {
    const quick = benchShapes(QUICK_CONFIG);
    expect(quick.parked.map((s) => s.id)).toEqual(['parked-100']);
    expect(quick.wake.title).toContain('(20 handoffs per round');
    expect(quick.crowd.map((s) => s.id)).toEqual(['crowd-4x8']);
    expect(QUICK_CONFIG.flashSale.stock).toBeLessThan(FULL_CONFIG.flashSale.stock);
    expect(QUICK_CONFIG.contendedMs).toBeLessThan(FULL_CONFIG.contendedMs);
  });
});

describe('bench run filter', () => {
  const shapeIds = ['floor', 'serial', 'crowd-4x64', 'crowd-8x16', 'parked-1000', 'flash-sale'];
  const libraryIds = ['ours', 'ours-unfair', 'redis-semaphore', 'bullmq'];

  it('selects shapes by id or by family, and libraries by id', () => {
    const filter = parseRunFilter('crowd,flash-sale', 'ours,redis-semaphore', shapeIds, libraryIds);
    expect(shapeIds.filter((id) => shapeSelected(filter, id))).toEqual([
      'crowd-4x64',
      'crowd-8x16',
      'flash-sale',
    ]);
    const rows = libraryIds.map((id) => ({ id }));
    expect(selectedLibraries(filter, rows).map((r) => r.id)).toEqual(['ours', 'redis-semaphore']);
    expect(filterNote(filter)).toContain(
      '--shapes crowd,flash-sale --libraries ours,redis-semaphore',
    );
  });

  it('selects everything without options', () => {
    const filter = parseRunFilter(undefined, undefined, shapeIds, libraryIds);
    expect(shapeIds.every((id) => shapeSelected(filter, id))).toBe(true);
    expect(selectedLibraries(filter, [{ id: 'x' }])).toHaveLength(1);
    expect(filterNote(filter)).toBeUndefined();
  });

  it('refuses an unknown shape or library, naming the option and the value', () => {
    expect(() => parseRunFilter('park', undefined, shapeIds, libraryIds)).toThrow(
      "--shapes: unknown value 'park'",
    );
    expect(() => parseRunFilter(undefined, 'ours,redlok', shapeIds, libraryIds)).toThrow(
      "--libraries: unknown value 'redlok'",
    );
    expect(() => parseRunFilter('', undefined, shapeIds, libraryIds)).toThrow('--shapes');
  });
});

describe('parked summary', () => {
  const load = { commandsPerSec: 40, cpuPct: 0.5 };
  const part = (p: Partial<ParkReport>): ParkReport => ({
    acquired: 0,
    lastAcquiredAt: null,
    gaveUp: 0,
    unfinished: 0,
    ...p,
  });

  it('times the drain from the release to the last waiter when nobody is left', () => {
    const metrics = summarizeParked(
      [part({ acquired: 3, lastAcquiredAt: 1_250 }), part({ acquired: 2, lastAcquiredAt: 1_400 })],
      load,
      1_000,
    );
    expect(metrics).toEqual({
      commandsPerSec: 40,
      redisCpuPct: 0.5,
      acquired: 5,
      gaveUp: 0,
      unfinished: 0,
      drainMs: 400,
    });
  });

  it('has no drain time when waiters were still waiting at the cut-off or none got it', () => {
    const cut = summarizeParked(
      [part({ acquired: 3, lastAcquiredAt: 1_250, unfinished: 7 })],
      load,
      1_000,
    );
    expect(cut.unfinished).toBe(7);
    expect(cut).not.toHaveProperty('drainMs');
    const gaveUp = summarizeParked([part({ gaveUp: 10 })], load, 1_000);
    expect(gaveUp.gaveUp).toBe(10);
    expect(gaveUp).not.toHaveProperty('drainMs');
  });
});

describe('flash-sale summary', () => {
  const config = { ...FULL_CONFIG.flashSale, stock: 3 };
  // Each row written 10 × n ms after its unit was sold.
  const order = (n: number, at: string): OrderRow => ({
    orderId: `s-${n}`,
    sku: 's',
    userId: `buyer-${n}`,
    price: 1,
    fence: n,
    boughtAt: at,
    createdAt: new Date(Date.parse(at) + 10 * n).toISOString(),
  });
  const orders = [
    order(1, '2030-01-01T00:00:00.000Z'),
    order(3, '2030-01-01T00:00:00.500Z'),
    order(2, '2030-01-01T00:00:00.100Z'),
  ];
  const answers = (statuses: number[]) => statuses.map((status, i) => ({ status, ms: i + 1 }));

  it('takes the sell rate from the first to the last boughtAt', () => {
    expect(sellRate(orders)).toBe(4);
    expect(sellRate(orders.slice(0, 1))).toBeNaN();
  });

  it('counts 423s, oversold units and answers it did not expect', () => {
    const sold: SaleStatus = { sku: 's', stock: 0, sold: 3, orders: 3, pending: 0 };
    const buys = {
      answers: answers([202, 202, 202, 423, 410, 409, 500]),
      elapsedMs: 700,
      errors: 1,
    };
    const ceiling = { answers: answers([200, 200, 200, 200]), elapsedMs: 2, errors: 0 };
    const metrics = summarizeFlashSale(config, buys, ceiling, sold, orders);
    expect(metrics.locked).toBe(1);
    expect(metrics.oversold).toBe(0);
    expect(metrics.soldOut).toBe(1);
    expect(metrics.ceilingPerSec).toBe(2_000);
    expect(metrics.buyPerSec).toBe(10);
    expect(metrics.unexpected).toBe(2);
    expect(metrics.buyP99Ms).toBe(7);
    expect(metrics.lost).toBe(0);
  });

  it('takes buy→row times and rows/s from the rows, and counts 503s', () => {
    expect(rowTimes(orders)).toEqual({
      p50Ms: 20,
      p99Ms: expect.closeTo(30, 0) as number,
      rowsPerSec: expect.closeTo(2 / 0.52, 6) as number,
    });
    const status: SaleStatus = { sku: 's', stock: 0, sold: 4, orders: 3, pending: 1 };
    const buys = { answers: answers([202, 202, 202, 202, 503]), elapsedMs: 100, errors: 0 };
    const ceiling = { answers: answers([200]), elapsedMs: 1, errors: 0 };
    const metrics = summarizeFlashSale({ ...config, stock: 4 }, buys, ceiling, status, orders);
    expect(metrics.unavailable).toBe(1);
    expect(metrics.lost).toBe(1);
  });

  it('reports units sold beyond the stock as oversold', () => {
    const over: SaleStatus = { sku: 's', stock: -1, sold: 4, orders: 3, pending: 1 };
    const buys = { answers: answers([202, 202, 202, 202]), elapsedMs: 100, errors: 0 };
    const ceiling = { answers: answers([200]), elapsedMs: 1, errors: 0 };
    const metrics = summarizeFlashSale(config, buys, ceiling, over, orders);
    expect(metrics.oversold).toBe(1);
    expect(metrics.soldOut).toBe(0);
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

  it('takes Jain over processes and over every caller', () => {
    const metrics = summarizeContended(
      [
        report({ sections: 8, sectionsPerCaller: [8, 0] }),
        report({ sections: 8, sectionsPerCaller: [4, 4] }),
      ],
      1_000,
      16,
    );
    expect(metrics.jain).toBe(1);
    expect(metrics.jainCallers).toBeCloseTo(256 / (4 * 96), 10);
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

  it('wake: p50 and p90 above the floor the shape measured itself', () => {
    expect(
      derivedMetrics('wake', { p50Ms: 1.1, p90Ms: 1.5, floorP50Ms: 0.5, floorP90Ms: 0.7 }),
    ).toEqual({ overFloorMs: expect.closeTo(0.6), overFloorP90Ms: expect.closeTo(0.8) });
  });

  it('handoff: p50 in round trips and above the pub/sub floor', () => {
    const derived = derivedMetrics('handoff', { p50Ms: 0.8, roundTripMs: 0.05 }, 0.5);
    expect(derived!.roundTrips).toBeCloseTo(16, 10);
    expect(derived!.overPubSubMs).toBeCloseTo(0.3, 10);
  });

  it('flash-sale: the sell rate over the HTTP ceiling', () => {
    expect(derivedMetrics('flash-sale', { sellPerSec: 500, ceilingPerSec: 2_000 })).toEqual({
      sellToCeiling: 0.25,
    });
  });

  it('derives nothing for other shapes or without a measured round trip', () => {
    expect(derivedMetrics('parallel-64', { pairsPerSec: 1, roundTripMs: 1 })).toBeUndefined();
    expect(derivedMetrics('serial', { pairsPerSec: 1 })).toBeUndefined();
  });
});
