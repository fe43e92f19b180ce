import type { LockLibrary } from '../adapters/lock-adapter';
import type { BenchConfig } from '../bench-config';
import type { ChildSetup } from '../support/bench-child';
import { monotonicMs, sleep, sleepUntil } from '../support/monotonic-clock';
import { RedisLoadMeter, type RedisLoad } from '../support/redis-load-meter';
import type { ReleaseReport } from './handoff.child';
import type { ParkReport } from './parked.child';
import { benchKey, type Metrics, type Shape } from './shape';

/** The id of the parked shape with `waiters` waiters, e.g. `parked-10000`. */
export function parkedShapeId(waiters: number): string {
  return `parked-${waiters}`;
}

/**
 * The parked metrics of one run:
 * - `commandsPerSec`, `redisCpuPct`: what the redis-server did while every waiter was parked;
 * - `acquired`: waiters that got the lock; `gaveUp`: waiters whose library gave up;
 *   `unfinished`: waiters still waiting when the drain was cut off;
 * - `drainMs` (only when nobody was left waiting and someone got the lock): from just before the
 *   holder called release to the last waiter getting the lock.
 */
export function summarizeParked(
  reports: readonly ParkReport[],
  load: RedisLoad,
  releasedAt: number,
): Metrics {
  const sum = (of: (r: ParkReport) => number) => reports.reduce((a, r) => a + of(r), 0);
  const metrics: Metrics = {
    commandsPerSec: load.commandsPerSec,
    redisCpuPct: load.cpuPct,
    acquired: sum((r) => r.acquired),
    gaveUp: sum((r) => r.gaveUp),
    unfinished: sum((r) => r.unfinished),
  };
  const last = reports.map((r) => r.lastAcquiredAt).filter((t): t is number => t !== null);
  if (metrics.unfinished === 0 && last.length > 0) metrics.drainMs = Math.max(...last) - releasedAt;
  return metrics;
}

/**
 * The parked shapes: one child process holds a key for `config.parkedHoldMs`; `waiters` waiters,
 * spread over `config.parkedProcesses` other processes, call acquire on it and wait (up to
 * `config.parkedWaitMs`, each library's own wait option). Once every waiter has called acquire
 * and `parkedSettleMs` passed, the Redis load is measured for `parkedWindowMs` (INFO
 * commandstats and INFO cpu on an uncounted connection): what waiting costs while nothing
 * happens. Then the holder releases and every waiter releases as soon as it gets the lock: the
 * drain, cut off `parkedDrainCapMs` after the release (waiters still waiting then are counted as
 * unfinished, and the shape ends instead of holding up the run). Metrics: `summarizeParked`.
 */
export function parkedShape(config: BenchConfig, waiters: number): Shape<LockLibrary> {
  const id = parkedShapeId(waiters);
  const processes = config.parkedProcesses;
  const perProcess = Math.ceil(waiters / processes);
  return {
    id,
    title:
      `${id}: ${waiters.toLocaleString('en-US')} waiters over ${processes} processes on one ` +
      `key held ${config.parkedHoldMs / 1000} s by another process; Redis load while parked ` +
      `(${config.parkedWindowMs / 1000} s window), then the drain`,
    // Set-up and teardown of thousands of waiters on a loaded machine take their time too.
    timeoutMs: config.parkedHoldMs + config.parkedDrainCapMs + 120_000,
    async run(library, ctx) {
      const { url } = ctx;
      const children = ctx.children.slice(0, processes + 1);
      if (children.length <= processes) {
        throw new Error(`${id} needs ${processes + 1} child processes, the run has fewer`);
      }
      const holder = children[processes];
      const parked = children.slice(0, processes);
      const key = `${benchKey(id, library.id, ctx.round)}:lock`;
      const setup: ChildSetup = { library: library.id, url, key, warmupPairs: config.warmupPairs };
      await Promise.all(children.map((c) => c.call('setup', setup)));
      try {
        await holder.call('hold', { key });
        const heldAt = monotonicMs();
        const park = { key, waiters: perProcess, waitMs: config.parkedWaitMs };
        await Promise.all(parked.map((c) => c.call('parkStart', park)));
        await sleep(config.parkedSettleMs);
        const meter = await RedisLoadMeter.start(url);
        await sleep(config.parkedWindowMs);
        const load = await meter.stop();
        await sleepUntil(heldAt + config.parkedHoldMs);
        const { releasedAt } = await holder.call<ReleaseReport>('release', { delayMs: 0 });
        const deadline = releasedAt + config.parkedDrainCapMs;
        const reports = await Promise.all(
          parked.map((c) =>
            c.call<ParkReport>('parkFinish', { deadline }, config.parkedDrainCapMs + 60_000),
          ),
        );
        const gaveUp = reports.find((r) => r.gaveUpSample)?.gaveUpSample;
        if (gaveUp) console.log(`    (a waiter gave up: ${gaveUp.split('\n')[0]})`);
        return summarizeParked(reports, load, releasedAt);
      } finally {
        await Promise.all(children.map((c) => c.call('teardown')));
      }
    },
  };
}
