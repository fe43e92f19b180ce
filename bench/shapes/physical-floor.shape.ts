import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { redisServerBinary } from '../../scripts/redis-server';
import { percentile } from '../support/bench-stats';
import { monotonicMs } from '../support/monotonic-clock';
import { uncountedClient } from '../support/request-counter';
import { awaitedLatencies } from '../support/round-trip-probe';
import type { LockAdapter, LockLibrary } from '../adapters/lock-adapter';
import { runContended } from './contended.child';
import { measurePairs } from './lock-throughput.shape';
import type { Metrics, Shape, ShapeContext } from './shape';

const run = promisify(execFile);

/** One way of measuring a single round trip to the bench server. */
export interface FloorProbe {
  readonly id: string;
  readonly label: string;
  measure(ctx: ShapeContext): Promise<Metrics>;
}

/**
 * The `SET` row of `redis-benchmark --csv` output: `requestsPerSec`, `p50Ms`, `p99Ms`, found by
 * the header's column names (`"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",
 * "p95_latency_ms","p99_latency_ms","max_latency_ms"` in Redis 7). Throws on other output.
 */
export function parseRedisBenchmarkCsv(stdout: string): Metrics {
  const rows = stdout
    .trim()
    .split('\n')
    .map((line) => line.trim().replace(/"/g, '').split(','));
  const header = rows.find((cells) => cells[0] === 'test');
  const row = rows.find((cells) => cells[0] === 'SET');
  const column = (name: string) => {
    const i = header?.indexOf(name) ?? -1;
    const value = i < 0 ? NaN : Number(row?.[i]);
    if (!Number.isFinite(value)) throw new Error(`unexpected redis-benchmark output:\n${stdout}`);
    return value;
  };
  return {
    requestsPerSec: column('rps'),
    p50Ms: column('p50_latency_ms'),
    p99Ms: column('p99_latency_ms'),
  };
}

/**
 * `redis-benchmark -c 1 -t set`: one connection, one request in flight, so one request is one
 * round trip through a C client. Metrics: `requestsPerSec`, `p50Ms`, `p99Ms` (its percentiles).
 */
const redisBenchmark: FloorProbe = {
  id: 'redis-benchmark',
  label: 'redis-benchmark -c 1 -t set',
  async measure({ url, config }) {
    const { port } = new URL(url);
    const { stdout } = await run(redisServerBinary('redis-benchmark'), [
      ...['-h', '127.0.0.1', '-p', port, '-c', '1'],
      ...['-n', String(config.floorRequests), '-t', 'set', '--csv'],
    ]);
    return parseRedisBenchmarkCsv(stdout);
  },
};

/**
 * The same from Node: one ioredis client, `SET` awaited one at a time for `throughputMs`. The
 * difference to redis-benchmark is the Node client's own cost per request, which every library
 * here pays on each of its requests. Metrics: `requestsPerSec`, `p50Ms`, `p99Ms`.
 */
const ioredisRoundTrip: FloorProbe = {
  id: 'ioredis',
  label: 'ioredis SET, one client, awaited',
  async measure({ url, config }) {
    const client = uncountedClient(new Redis(url));
    try {
      for (let i = 0; i < 200; i++) await client.set('bench:floor', 'x');
      const started = monotonicMs();
      const latencies = await awaitedLatencies(
        () => client.set('bench:floor', 'x'),
        config.throughputMs,
      );
      return {
        requestsPerSec: (latencies.length / (monotonicMs() - started)) * 1000,
        p50Ms: percentile(latencies, 50),
        p99Ms: percentile(latencies, 99),
      };
    } finally {
      await client.quit();
    }
  },
};

/**
 * The floor of a wake-up handoff: plain `PUBLISH` in one child process to `SUBSCRIBE` in another,
 * with the same idle gaps and the same clock as the handoff shape. Metrics: `p50Ms`, `p99Ms`
 * (publish call to message received).
 */
const pubSubDelivery: FloorProbe = {
  id: 'pubsub',
  label: 'PUBLISH → SUBSCRIBE across processes (ioredis)',
  async measure({ url, config, children, round }) {
    const [publisher, subscriber] = children;
    const channel = `bench:floor:pubsub:${round}`;
    await subscriber.call('floorSubscribe', { url, channel });
    try {
      const latencies: number[] = [];
      const [low, high] = config.handoffDelayMs;
      for (let i = 0; i < config.handoffRounds; i++) {
        await subscriber.call('floorExpect');
        const delayMs = low + Math.random() * (high - low);
        const [sentAt, receivedAt] = await Promise.all([
          publisher.call<number>('floorPublish', { url, channel, delayMs }),
          subscriber.call<number>('floorReceived'),
        ]);
        latencies.push(receivedAt - sentAt);
      }
      return { p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99) };
    } finally {
      await Promise.all([publisher.call('floorClose'), subscriber.call('floorClose')]);
    }
  },
};

/** A lock that is never taken: what the section ceiling runs its loop with. */
const NO_LOCK: LockAdapter = {
  acquire: () => Promise.resolve(null),
  release: () => Promise.resolve(),
  close: () => Promise.resolve(),
};

/**
 * The ceiling of the contended and crowd shapes: their section loop (MULTI, sleep `holdMs`,
 * DECR) run by one caller with no lock at all, for `contendedMs`. Sections of one key cannot
 * follow each other faster than this, so no lock can hand off faster however it is built.
 * Metrics: `sectionsPerSec`.
 */
const sectionCeiling: FloorProbe = {
  id: 'section-ceiling',
  label: 'contended section, one caller, no lock (handoffs/s ceiling)',
  async measure({ url, config, round }) {
    const marker = uncountedClient(new Redis(url));
    try {
      const base = `bench:floor:ceiling:${round}`;
      const report = await runContended(NO_LOCK, marker, {
        key: `${base}:lock`,
        insideKey: `${base}:inside`,
        counterKey: `${base}:counter`,
        startAt: monotonicMs(),
        durationMs: config.contendedMs,
        holdMs: config.holdMs,
      });
      return { sectionsPerSec: (report.sectionsInWindow / config.contendedMs) * 1000 };
    } finally {
      await marker.quit();
    }
  },
};

/**
 * The ceiling of the serial shape: a "lock" that is only `SET key x NX PX` and `DEL key` on one
 * ioredis client, with no token, no check that the key is still ours, no fence, no timer, run
 * by the serial shape's own loop. A lock whose acquire and release each wait for their reply
 * makes these two round trips at least, so none can run more pairs per second than this.
 * Metrics: `pairsPerSec` (and the serial shape's other metrics).
 */
const bareSetDel: LockLibrary = {
  id: 'serial-ceiling',
  label: 'SET NX PX + DEL, no lock logic',
  ours: false,
  async create(url) {
    const client = new Redis(url);
    await client.ping();
    return {
      acquire: async (key) => {
        await client.set(key, 'x', 'PX', 30_000, 'NX');
        return key;
      },
      release: async (key) => void (await client.del(key as string)),
      close: async () => void (await client.quit()),
    };
  },
};

/** A floor probe that runs the serial shape's loop on `ceiling` (a "lock" without lock logic). */
function serialCeilingProbe(ceiling: LockLibrary, label: string): FloorProbe {
  return {
    id: ceiling.id,
    label,
    measure: (ctx) => measurePairs(ceiling.id, 1, ceiling, ctx, false),
  };
}

/** `SET NX PX` and `INCR` of the fence counter, in one script: the least a fenced acquire does. */
const FENCED_ACQUIRE =
  "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then " +
  "return redis.call('INCR', KEYS[2]) end return 0";
/** Deletes the key only when it holds the token: the least a safe release does. */
const CHECKED_RELEASE =
  "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/**
 * The ceiling of a lock with a fence: the spec asks every multi-step operation to be one Lua
 * script, and an acquire that hands out a fence is two steps (take the key, increment its
 * counter), so it is one script call, not a plain `SET`; the release checks the token in another.
 * These two minimal scripts (no line, no wait marks, no counter expiry) on one ioredis client,
 * run by the serial shape's own loop, are what no fenced lock with an awaited acquire and release
 * can beat. Metrics: `pairsPerSec` (and the serial shape's other metrics).
 */
const fencedScripts: LockLibrary = {
  id: 'fenced-ceiling',
  label: 'fenced acquire script + checked release script, no lock logic',
  ours: false,
  async create(url) {
    const client = new Redis(url);
    const [acquire, release] = await Promise.all(
      [FENCED_ACQUIRE, CHECKED_RELEASE].map(
        (body) => client.script('LOAD', body) as Promise<string>,
      ),
    );
    let n = 0;
    return {
      acquire: async (key) => {
        const token = `t${n++}`;
        await client.evalsha(acquire, 2, key, `${key}:fence`, token, 30_000);
        return [key, token];
      },
      release: async (held) => {
        const [key, token] = held as [string, string];
        await client.evalsha(release, 1, key, token);
      },
      close: async () => void (await client.quit()),
    };
  },
};

/** Every floor probe, in table order. */
export const FLOOR_PROBES: readonly FloorProbe[] = [
  redisBenchmark,
  ioredisRoundTrip,
  pubSubDelivery,
  sectionCeiling,
  serialCeilingProbe(bareSetDel, 'serial pair, one client, SET NX PX + DEL (pairs/s ceiling)'),
  serialCeilingProbe(
    fencedScripts,
    'serial pair, one client, fenced acquire script + checked release script (pairs/s ceiling of a fenced lock)',
  ),
];

/** Shape 5: the physical floor, one round trip, measured in the same run on the same server. */
export const physicalFloorShape: Shape<FloorProbe> = {
  id: 'floor',
  title: 'physical floor: one round trip',
  run: (probe, ctx) => probe.measure(ctx),
};
