/** How long and how often each shape runs. */
export interface BenchConfig {
  /** `full` for `npm run bench`, `quick` for the CI smoke test (`npm run bench:quick`). */
  readonly mode: 'full' | 'quick';
  /** Rounds; each round runs every shape for every library, in a rotated order. */
  readonly rounds: number;
  /** Measured time of the serial and parallel shapes, in ms (after a warm-up). */
  readonly throughputMs: number;
  /**
   * Acquire+release pairs run before measuring (script loading, connection warm-up), in this
   * process for the throughput shapes and in each child process for the multi-process shapes.
   */
  readonly warmupPairs: number;
  /**
   * Time each lock library runs unmeasured before the first round, in ms: the JIT warms up the
   * code all libraries share (ioredis), which would otherwise slow whichever library runs first.
   */
  readonly jitWarmupMs: number;
  /**
   * How long an awaited `PING` loop runs right before a serial or handoff window, in ms: its mean
   * is the round trip the "= N round trips" columns divide by.
   */
  readonly roundTripProbeMs: number;
  /** Concurrent loops of the parallel shape. */
  readonly parallelLoops: number;
  /** OS processes of the contended shape. */
  readonly contendedProcesses: number;
  /** How long the contended shape runs, in ms. */
  readonly contendedMs: number;
  /** How long each contended section sleeps while holding the lock, in ms. */
  readonly holdMs: number;
  /** Handoffs measured per library and round. */
  readonly handoffRounds: number;
  /**
   * Range of the holder's delay between "the waiter is blocked" and the release, in ms; random
   * so that polling libraries are caught at every phase of their poll cycle.
   */
  readonly handoffDelayMs: readonly [number, number];
  /** Requests of `redis-benchmark -c 1 -t set`. */
  readonly floorRequests: number;
  /** Jobs of each queue shape. */
  readonly queueJobs: number;
  /** Concurrent producers of the enqueue shape. */
  readonly producers: number;
  /** Consumer concurrencies of the drain shapes. */
  readonly drainConcurrency: readonly number[];
  /** Groups of the groups shape. */
  readonly groups: number;
  /** Rate limit of the rate-limited shape. */
  readonly limiter: { readonly max: number; readonly durationMs: number };
}

/** `npm run bench`: what RESULTS.md is made from. */
export const FULL_CONFIG: BenchConfig = {
  mode: 'full',
  rounds: 3,
  throughputMs: 2_000,
  warmupPairs: 200,
  jitWarmupMs: 1_000,
  roundTripProbeMs: 300,
  parallelLoops: 64,
  contendedProcesses: 8,
  contendedMs: 4_000,
  holdMs: 1,
  handoffRounds: 100,
  handoffDelayMs: [20, 120],
  floorRequests: 50_000,
  queueJobs: 10_000,
  producers: 50,
  drainConcurrency: [1, 10, 50],
  groups: 100,
  limiter: { max: 1_000, durationMs: 500 },
};

/** `npm run bench:quick`: every shape once, small, in well under a minute; no thresholds. */
export const QUICK_CONFIG: BenchConfig = {
  ...FULL_CONFIG,
  mode: 'quick',
  rounds: 1,
  throughputMs: 300,
  warmupPairs: 50,
  jitWarmupMs: 400,
  contendedMs: 1_000,
  handoffRounds: 8,
  handoffDelayMs: [20, 60],
  floorRequests: 5_000,
  queueJobs: 1_000,
  limiter: { max: 200, durationMs: 200 },
};

/**
 * How long the orchestrator lets one shape run for one library before it records the shape as
 * failed and goes on: its longest measured stretch plus a minute for set-up, warm-up and the
 * slowest library's stragglers.
 */
export function shapeTimeoutMs(config: BenchConfig): number {
  const longest = Math.max(
    config.throughputMs,
    config.contendedMs,
    config.handoffRounds * config.handoffDelayMs[1],
  );
  return longest + 60_000;
}
