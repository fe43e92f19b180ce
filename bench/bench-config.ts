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
  /** Distinct keys each locked and released once by the distinct-keys shape. */
  readonly distinctKeys: number;
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
  /** Handoffs of the wake shape per library and round (each next to a pub/sub floor probe). */
  readonly wakeRounds: number;
  /** How long the wake shape's holder keeps the lock while the waiter is parked, in ms. */
  readonly wakeHoldMs: number;
  /** Requests of `redis-benchmark -c 1 -t set`. */
  readonly floorRequests: number;
  /** Jobs of each queue shape. */
  readonly queueJobs: number;
  /** Concurrent producers of the enqueue shape. */
  readonly producers: number;
  /** Consumer concurrencies of the drain shapes. */
  readonly drainConcurrency: readonly number[];
  /**
   * The "completion seen on another instance" shape: tasks enqueued and awaited by this process
   * (a worker runs them in another process), and how many are in flight at once.
   */
  readonly waitForTasks: number;
  readonly waitForInFlight: number;
  /**
   * The cancel shape: running tasks cancelled one at a time, then as many again in bursts of
   * `cancelBurst` (that many running at once, all cancelled together).
   */
  readonly cancels: number;
  readonly cancelBurst: number;
  /** Groups of the groups shape. */
  readonly groups: number;
  /** The flows shape: flows run end to end, and the children of each flow's parent. */
  readonly flows: number;
  readonly flowChildren: number;
  /** Rate limit of the rate-limited shape. */
  readonly limiter: { readonly max: number; readonly durationMs: number };
  /**
   * The crowd shapes, as `[processes, callers per process]`: that many OS processes, each with
   * that many concurrent callers, on one key for `contendedMs`, holding it `holdMs` per section.
   */
  readonly crowds: readonly (readonly [number, number])[];
  /** The parked shapes: waiters in all, spread evenly over `parkedProcesses`. */
  readonly parkedWaiters: readonly number[];
  /** OS processes the parked waiters run in (one more process holds the lock). */
  readonly parkedProcesses: number;
  /** How long the parked shape's holder keeps the lock, from acquiring it to releasing, in ms. */
  readonly parkedHoldMs: number;
  /**
   * Time between the last waiter calling acquire and the start of the measured window, in ms
   * (the waiters' first requests are not "parked" yet).
   */
  readonly parkedSettleMs: number;
  /** Measured window of the parked shape (Redis commands/s and CPU while parked), in ms. */
  readonly parkedWindowMs: number;
  /**
   * How long each parked waiter is willing to wait (each library's own wait option; redlock's
   * is its retry count and keeps its default), in ms.
   */
  readonly parkedWaitMs: number;
  /**
   * How long the drain may take after the release before the shape stops it and counts the
   * waiters still waiting as unfinished, in ms: bounds a library that cannot drain the line.
   */
  readonly parkedDrainCapMs: number;
  /** The flash-sale shape (two instances of the sample app, ours only). */
  readonly flashSale: FlashSaleConfig;
}

/** Size of the flash-sale shape. */
export interface FlashSaleConfig {
  /** Units of the measured sale. */
  readonly stock: number;
  /** Distinct buyers, one buy each. */
  readonly buyers: number;
  /** HTTP connections, split evenly over the two instances. */
  readonly connections: number;
  /** How long the HTTP ceiling (GET of the sale's status) is measured, in ms. */
  readonly ceilingMs: number;
  /** Stock and buyers of the unmeasured warm-up sale run first (JIT, connections). */
  readonly warmUpStock: number;
  readonly warmUpBuyers: number;
}

/** `npm run bench`: what RESULTS.md is made from. */
export const FULL_CONFIG: BenchConfig = {
  mode: 'full',
  // Issue 35's targets are medians of at least 5 rounds: with 3, one slow round on this 2-core
  // machine moved parallel-64 between 0.87x and 1.21x of the best peer from one full run to the next.
  rounds: 5,
  throughputMs: 2_000,
  warmupPairs: 200,
  jitWarmupMs: 1_000,
  roundTripProbeMs: 300,
  parallelLoops: 64,
  distinctKeys: 20_000,
  contendedProcesses: 8,
  contendedMs: 4_000,
  holdMs: 1,
  handoffRounds: 100,
  handoffDelayMs: [20, 120],
  wakeRounds: 150,
  wakeHoldMs: 20,
  floorRequests: 50_000,
  queueJobs: 10_000,
  producers: 50,
  drainConcurrency: [1, 10, 50],
  waitForTasks: 2_000,
  waitForInFlight: 50,
  cancels: 200,
  cancelBurst: 50,
  groups: 100,
  flows: 1_000,
  flowChildren: 10,
  limiter: { max: 1_000, durationMs: 500 },
  crowds: [
    [4, 64],
    [8, 16],
  ],
  parkedWaiters: [1_000, 10_000],
  parkedProcesses: 4,
  parkedHoldMs: 6_000,
  parkedSettleMs: 1_000,
  parkedWindowMs: 3_000,
  parkedWaitMs: 120_000,
  parkedDrainCapMs: 20_000,
  flashSale: {
    stock: 2_000,
    buyers: 12_000,
    connections: 300,
    ceilingMs: 4_000,
    warmUpStock: 200,
    warmUpBuyers: 1_000,
  },
};

/** `npm run bench:quick`: every shape once, small, in well under a minute; no thresholds. */
export const QUICK_CONFIG: BenchConfig = {
  ...FULL_CONFIG,
  mode: 'quick',
  rounds: 1,
  throughputMs: 300,
  warmupPairs: 50,
  jitWarmupMs: 400,
  distinctKeys: 2_000,
  contendedMs: 1_000,
  handoffRounds: 8,
  handoffDelayMs: [20, 60],
  wakeRounds: 20,
  floorRequests: 5_000,
  queueJobs: 1_000,
  waitForTasks: 400,
  cancels: 40,
  cancelBurst: 20,
  flows: 100,
  limiter: { max: 200, durationMs: 200 },
  // Small crowds: the polling peers' stragglers after the window would otherwise dominate.
  crowds: [[4, 8]],
  parkedWaiters: [100],
  parkedHoldMs: 1_000,
  parkedSettleMs: 200,
  parkedWindowMs: 400,
  parkedDrainCapMs: 10_000,
  flashSale: {
    stock: 100,
    buyers: 600,
    connections: 40,
    ceilingMs: 500,
    warmUpStock: 10,
    warmUpBuyers: 50,
  },
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
