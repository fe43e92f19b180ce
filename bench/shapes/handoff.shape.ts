import type { LockLibrary } from '../adapters/lock-adapter';
import type { BenchChild } from '../support/bench-child';
import { percentile } from '../support/bench-stats';
import { monotonicMs } from '../support/monotonic-clock';
import type { AcquireReport, ReleaseReport } from './handoff.child';
import { benchKey, type Shape } from './shape';

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
 * monotonic clock. Metrics: `p50Ms`, `p99Ms`, `maxMs`, `requestsPerHandoff` (A's release plus
 * every request B sent while waiting), `failures` (B's acquire gave up).
 */
export const handoffShape: Shape<LockLibrary> = {
  id: 'handoff',
  title: 'handoff: release in process A to acquisition in process B',
  async run(library, ctx) {
    const { config, url } = ctx;
    const [holder, waiter] = ctx.children;
    const key = `${benchKey('handoff', library.id, ctx.round)}:lock`;
    await Promise.all([holder, waiter].map((c) => c.call('setup', { library: library.id, url })));
    try {
      const latencies: number[] = [];
      let requests = 0;
      let failures = 0;
      const [low, high] = config.handoffDelayMs;
      for (let i = 0; i < config.handoffRounds; i++) {
        await holder.call('hold', { key });
        await waiter.call('startWait', { key });
        const delayMs = low + Math.random() * (high - low);
        const [released, acquired] = await Promise.all([
          holder.call<ReleaseReport>('release', { delayMs }),
          waiter.call<AcquireReport>('finishWait'),
        ]);
        requests += released.requests + acquired.requests;
        if (acquired.acquiredAt === undefined) failures++;
        else latencies.push(acquired.acquiredAt - released.releasedAt);
      }
      return {
        p50Ms: percentile(latencies, 50),
        p99Ms: percentile(latencies, 99),
        maxMs: latencies.length ? Math.max(...latencies) : NaN,
        requestsPerHandoff: requests / config.handoffRounds,
        failures,
      };
    } finally {
      await Promise.all([holder, waiter].map((c) => c.call('teardown')));
    }
  },
};
