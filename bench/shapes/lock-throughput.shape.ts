import { Redis } from 'ioredis';
import type { LockLibrary } from '../adapters/lock-adapter';
import type { BenchConfig } from '../bench-config';
import { CpuMeter } from '../support/cpu-meter';
import { monotonicMs } from '../support/monotonic-clock';
import { requestCount } from '../support/request-counter';
import { ioredisRoundTripMs } from '../support/round-trip-probe';
import { uncountedClient } from '../support/request-counter';
import { benchKey, type Metrics, type Shape, type ShapeContext } from './shape';

/**
 * Acquire+release pairs per second of `loops` concurrent loops in this process, each on its own
 * free key, over `config.throughputMs` after `config.warmupPairs` unmeasured pairs.
 * Metrics: `pairsPerSec`, `requestsPerPair`, `clientCpuUsPerPair` (this process),
 * `redisCpuUsPerPair` (the redis-server); with `probeRoundTrip`, also `roundTripMs`: the mean
 * ioredis `PING` round trip measured right before the window.
 */
export async function measurePairs(
  shape: string,
  loops: number,
  library: LockLibrary,
  ctx: ShapeContext,
  probeRoundTrip: boolean,
): Promise<Metrics> {
  const adapter = await library.create(ctx.url);
  try {
    const base = benchKey(shape, library.id, ctx.round);
    const keys = Array.from({ length: loops }, (_, i) => `${base}:${i}`);
    const pair = async (key: string) => adapter.release(await adapter.acquire(key));
    for (let i = 0; i < Math.max(ctx.config.warmupPairs, loops); i++) await pair(keys[i % loops]);
    const probe: Metrics = probeRoundTrip
      ? { roundTripMs: await ioredisRoundTripMs(ctx.url, ctx.config.roundTripProbeMs) }
      : {};

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
      ...probe,
    };
  } finally {
    await adapter.close();
  }
}

/**
 * Shape 1: one client, acquire+release pairs per second on one free key, with the ioredis round
 * trip measured right before (for "pair = N round trips").
 */
export const serialShape: Shape<LockLibrary> = {
  id: 'serial',
  title: 'serial: one client, acquire + release on one free key',
  run: (library, ctx) => measurePairs('serial', 1, library, ctx, true),
};

/** Shape 2: `config.parallelLoops` concurrent loops in one process on as many distinct free keys. */
export function parallelShape(config: BenchConfig): Shape<LockLibrary> {
  const loops = config.parallelLoops;
  return {
    id: `parallel-${loops}`,
    title: `parallel-${loops}: ${loops} concurrent loops in one process, ${loops} distinct keys`,
    run: (library, ctx) => measurePairs('parallel', loops, library, ctx, false),
  };
}

/** Bytes the redis-server holds for data (`INFO memory` used_memory) and its number of keys. */
async function redisFootprint(url: string): Promise<{ bytes: number; keys: number }> {
  const client = uncountedClient(new Redis(url));
  try {
    const info = await client.info('memory');
    const bytes = Number(/used_memory:(\d+)/.exec(info)?.[1] ?? NaN);
    return { bytes, keys: await client.dbsize() };
  } finally {
    client.disconnect();
  }
}

/** The distinct-keys shape, with the number of keys it locks. */
export interface DistinctKeysShape extends Shape<LockLibrary> {
  readonly keys: number;
}

/**
 * Shape 3: `config.distinctKeys` distinct keys, each acquired and released once by
 * `config.parallelLoops` concurrent loops (a route locking per order id). What Redis still holds
 * afterwards, per distinct key: `keysLeftPer1000` and `bytesLeftPerKey` (`used_memory` after the
 * loops minus before them, the warm-up's keys already counted in before); and what the pairs
 * cost: `pairsPerSec`, `requestsPerPair`, `clientCpuUsPerPair`, `redisCpuUsPerPair`.
 */
export function distinctKeysShape(config: BenchConfig): DistinctKeysShape {
  const keys = config.distinctKeys;
  return {
    id: 'distinct-keys',
    keys,
    title:
      `distinct-keys: ${keys.toLocaleString('en-US')} distinct keys, each locked and released ` +
      `once (${config.parallelLoops} loops): what stays in Redis`,
    run: async (library, ctx) => {
      const adapter = await library.create(ctx.url);
      try {
        const base = benchKey('distinct', library.id, ctx.round);
        const pair = async (key: string) => adapter.release(await adapter.acquire(key));
        for (let i = 0; i < ctx.config.warmupPairs; i++) await pair(`${base}:warm-up:${i}`);
        const before = await redisFootprint(ctx.url);
        const meter = await CpuMeter.start(ctx.url);
        const requestsBefore = requestCount();
        const started = monotonicMs();
        let next = 0;
        await Promise.all(
          Array.from({ length: ctx.config.parallelLoops }, async () => {
            while (next < keys) await pair(`${base}:${next++}`);
          }),
        );
        const elapsedMs = monotonicMs() - started;
        const requests = requestCount() - requestsBefore;
        const cpu = await meter.stop();
        const after = await redisFootprint(ctx.url);
        return {
          pairsPerSec: (keys / elapsedMs) * 1000,
          requestsPerPair: requests / keys,
          clientCpuUsPerPair: cpu.clientUs / keys,
          redisCpuUsPerPair: cpu.redisUs / keys,
          keysLeftPer1000: ((after.keys - before.keys) / keys) * 1000,
          bytesLeftPerKey: (after.bytes - before.bytes) / keys,
        };
      } finally {
        await adapter.close();
      }
    },
  };
}
