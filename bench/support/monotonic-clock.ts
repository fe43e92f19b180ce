/**
 * Milliseconds on the system-wide monotonic clock, with sub-microsecond resolution.
 *
 * `process.hrtime` reads `CLOCK_MONOTONIC` on Linux (libuv's `uv_hrtime`), which is one clock for
 * the whole machine: a value taken in one process can be subtracted from a value taken in
 * another. (`performance.timeOrigin + performance.now()` is not suitable: `timeOrigin` is a
 * per-process wall-clock reading and can be off by a fraction of a millisecond.) The handoff shape
 * verifies this at run time with `checkSharedClock` before it trusts cross-process differences.
 * @example
 * const t0 = monotonicMs(); await work(); const elapsedMs = monotonicMs() - t0;
 */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Resolves after `ms` (used to hold a lock for a fixed time, never to "let things settle"). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves at `atMs` on the monotonic clock (at once if it has passed). */
export function sleepUntil(atMs: number): Promise<void> {
  return sleep(Math.max(0, atMs - monotonicMs()));
}
