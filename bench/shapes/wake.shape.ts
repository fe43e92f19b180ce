import type { LockLibrary } from '../adapters/lock-adapter';
import type { BenchConfig } from '../bench-config';
import type { ChildSetup } from '../support/bench-child';
import { median, percentile } from '../support/bench-stats';
import type { AcquireReport, ReleaseReport } from './handoff.child';
import { benchKey, type Metrics, type Shape } from './shape';

/**
 * Shape "wake": a waiter parked in one process, woken by a release in another. Process A takes
 * the lock, process B calls acquire and parks behind it (nothing spins: B's event loop is idle),
 * and `wakeHoldMs` later A releases. Latency: from just before A calls release to B having the
 * lock (its acquire resolved), on the shared monotonic clock. Before each handoff the same two
 * processes measure the pub/sub floor with the same idle gap (A `PUBLISH`es `wakeHoldMs` after B
 * began to wait for the message, plain ioredis on both sides), so lock and floor see the same
 * load, interleaved. Metrics: `p50Ms`, `p90Ms`, `maxMs` (over the handoffs that happened),
 * `floorP50Ms`, `floorP90Ms` (publish called to message received), `failures` (B gave up: no
 * handoff), `gaveUpAfterMs`, `requestsPerHandoff`.
 */
export function wakeShape(config: BenchConfig): Shape<LockLibrary> {
  const { wakeRounds, wakeHoldMs } = config;
  return {
    id: 'wake',
    title:
      `wake: a waiter parked in process B, released by process A after ${wakeHoldMs} ms ` +
      `(${wakeRounds} handoffs per round, each next to a pub/sub floor probe)`,
    // A polling peer may take its whole retry delay per handoff (redlock: up to 300 ms).
    timeoutMs: wakeRounds * (2 * wakeHoldMs + 500) + 60_000,
    async run(library, ctx) {
      const { url } = ctx;
      const [holder, waiter] = ctx.children;
      const key = `${benchKey('wake', library.id, ctx.round)}:lock`;
      const channel = `${benchKey('wake', library.id, ctx.round)}:floor`;
      const setup: ChildSetup = { library: library.id, url, key, warmupPairs: config.warmupPairs };
      await Promise.all([holder, waiter].map((c) => c.call('setup', setup)));
      await waiter.call('floorSubscribe', { url, channel });
      try {
        const latencies: number[] = [];
        const floor: number[] = [];
        const gaveUpAfter: number[] = [];
        let requests = 0;
        for (let i = 0; i < wakeRounds; i++) {
          await waiter.call('floorExpect');
          const [sentAt, receivedAt] = await Promise.all([
            holder.call<number>('floorPublish', { url, channel, delayMs: wakeHoldMs }),
            waiter.call<number>('floorReceived'),
          ]);
          floor.push(receivedAt - sentAt);
          await holder.call('hold', { key });
          await waiter.call('startWait', { key });
          const [released, acquired] = await Promise.all([
            holder.call<ReleaseReport>('release', { delayMs: wakeHoldMs }),
            waiter.call<AcquireReport>('finishWait'),
          ]);
          requests += released.requests + acquired.requests;
          if ('acquiredAt' in acquired) latencies.push(acquired.acquiredAt - released.releasedAt);
          else gaveUpAfter.push(acquired.gaveUpAfterMs);
        }
        const metrics: Metrics = {
          p50Ms: percentile(latencies, 50),
          p90Ms: percentile(latencies, 90),
          maxMs: latencies.length ? Math.max(...latencies) : NaN,
          floorP50Ms: percentile(floor, 50),
          floorP90Ms: percentile(floor, 90),
          requestsPerHandoff: requests / wakeRounds,
          failures: gaveUpAfter.length,
        };
        if (gaveUpAfter.length) metrics.gaveUpAfterMs = median(gaveUpAfter);
        return metrics;
      } finally {
        await Promise.allSettled([waiter.call('floorClose'), holder.call('floorClose')]);
        await Promise.all([holder, waiter].map((c) => c.call('teardown')));
      }
    },
  };
}
