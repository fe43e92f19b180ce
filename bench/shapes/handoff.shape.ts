import type { LockLibrary } from '../adapters/lock-adapter';
import type { BenchConfig } from '../bench-config';
import type { BenchChild, ChildSetup } from '../support/bench-child';
import { median, percentile } from '../support/bench-stats';
import { monotonicMs } from '../support/monotonic-clock';
import { ioredisRoundTripMs } from '../support/round-trip-probe';
import type { AcquireReport, ReleaseReport } from './handoff.child';
import { benchKey, type Metrics, type Shape } from './shape';

/**
 * Checks that monotonic readings of `child` fall between readings taken here just before and
 * after asking for them, i.e. that the two processes share one monotonic clock (true on Linux,
 * where `process.hrtime` is `CLOCK_MONOTONIC`). Throws otherwise: cross-process latencies would
 * be meaningless.
 */
export async function checkSharedClock(child: BenchChild, samples = 5): Promise<void> {
  for (let i = 0; i < samples; i++) {
    const before = monotonicMs();
    const theirs = await child.call<number>('clock');
    const after = monotonicMs();
    if (theirs < before || theirs > after) {
      throw new Error(
        `child ${child.index}'s monotonic clock (${theirs}) is not between ${before} and ${after}: ` +
          'processes do not share a monotonic clock, handoff latencies cannot be measured',
      );
    }
  }
}

/**
 * Shape 4: process B blocks on a key that process A holds; after a random delay A releases.
 * Latency: from just before A calls release to B's acquire resolving, both read on the shared
 * monotonic clock. Metrics: `p50Ms`, `p99Ms`, `maxMs` (over the handoffs that happened),
 * `requestsPerHandoff` (A's release plus every request B sent while waiting), `failures` (B's
 * acquire gave up: no handoff, so no latency), `gaveUpAfterMs` (median time B waited before
 * giving up, only when it did), `roundTripMs` (ioredis `PING`, measured right before).
 */
export function handoffShape(config: BenchConfig): Shape<LockLibrary> {
  const { handoffRounds, handoffDelayMs } = config;
  return {
    id: 'handoff',
    title:
      'handoff: release in process A to acquisition in process B ' +
      `(${handoffRounds} handoffs per round)`,
    async run(library, ctx) {
      const { url } = ctx;
      const [holder, waiter] = ctx.children;
      const key = `${benchKey('handoff', library.id, ctx.round)}:lock`;
      const setup: ChildSetup = { library: library.id, url, key, warmupPairs: config.warmupPairs };
      await Promise.all([holder, waiter].map((c) => c.call('setup', setup)));
      try {
        const roundTripMs = await ioredisRoundTripMs(url, config.roundTripProbeMs);
        const latencies: number[] = [];
        const gaveUpAfter: number[] = [];
        let requests = 0;
        const [low, high] = handoffDelayMs;
        for (let i = 0; i < handoffRounds; i++) {
          await holder.call('hold', { key });
          await waiter.call('startWait', { key });
          const delayMs = low + Math.random() * (high - low);
          const [released, acquired] = await Promise.all([
            holder.call<ReleaseReport>('release', { delayMs }),
            waiter.call<AcquireReport>('finishWait'),
          ]);
          requests += released.requests + acquired.requests;
          if ('acquiredAt' in acquired) latencies.push(acquired.acquiredAt - released.releasedAt);
          else gaveUpAfter.push(acquired.gaveUpAfterMs);
        }
        const metrics: Metrics = {
          p50Ms: percentile(latencies, 50),
          p99Ms: percentile(latencies, 99),
          maxMs: latencies.length ? Math.max(...latencies) : NaN,
          requestsPerHandoff: requests / handoffRounds,
          failures: gaveUpAfter.length,
          roundTripMs,
        };
        if (gaveUpAfter.length) metrics.gaveUpAfterMs = median(gaveUpAfter);
        return metrics;
      } finally {
        await Promise.all([holder, waiter].map((c) => c.call('teardown')));
      }
    },
  };
}
