import type { LockLibrary } from '../adapters/lock-adapter';
import { CpuMeter } from '../support/cpu-meter';
import { monotonicMs } from '../support/monotonic-clock';
import { requestCount } from '../support/request-counter';
import { benchKey, type Metrics, type Shape, type ShapeContext } from './shape';

/**
 * Acquire+release pairs per second of `loops` concurrent loops in this process, each on its own
 * free key, over `config.throughputMs` after `config.warmupPairs` unmeasured pairs.
 * Metrics: `pairsPerSec`, `requestsPerPair`, `clientCpuUsPerPair` (this process),
 * `redisCpuUsPerPair` (the redis-server).
 */
async function measurePairs(
  shape: string,
  loops: number,
  library: LockLibrary,
  ctx: ShapeContext,
): Promise<Metrics> {
  const adapter = await library.create(ctx.url);
  try {
    const base = benchKey(shape, library.id, ctx.round);
    const keys = Array.from({ length: loops }, (_, i) => `${base}:${i}`);
    const pair = async (key: string) => adapter.release(await adapter.acquire(key));
    for (let i = 0; i < Math.max(ctx.config.warmupPairs, loops); i++) await pair(keys[i % loops]);

    const meter = await CpuMeter.start(ctx.url);
    const requestsBefore = requestCount();
    const started = monotonicMs();
    const end = started + ctx.config.throughputMs;
    const counts = await Promise.all(
      keys.map(async (key) => {
        let n = 0;
        while (monotonicMs() < end) {
          await pair(key);
          n++;
        }
        return n;
      }),
    );
    const elapsedMs = monotonicMs() - started;
    const requests = requestCount() - requestsBefore;
    const cpu = await meter.stop();
    const pairs = counts.reduce((a, b) => a + b, 0);
    return {
      pairsPerSec: (pairs / elapsedMs) * 1000,
      requestsPerPair: requests / pairs,
      clientCpuUsPerPair: cpu.clientUs / pairs,
      redisCpuUsPerPair: cpu.redisUs / pairs,
    };
  } finally {
    await adapter.close();
  }
}

/** Shape 1: one client, acquire+release pairs per second on one free key. */
export const serialShape: Shape<LockLibrary> = {
  id: 'serial',
  title: 'serial: one client, acquire + release on one free key',
  run: (library, ctx) => measurePairs('serial', 1, library, ctx),
};

/** Shape 2: 64 concurrent loops in one process on 64 distinct free keys. */
export const parallelShape: Shape<LockLibrary> = {
  id: 'parallel-64',
  title: 'parallel-64: 64 concurrent loops in one process, 64 distinct keys',
  run: (library, ctx) => measurePairs('parallel', ctx.config.parallelLoops, library, ctx),
};
