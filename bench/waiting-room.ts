/**
 * The waiting room at scale, on one private redis-server, with 3 instances of the module (3 Nest
 * application contexts in this process, each with its own connections):
 *
 * 1. `--visitors` visitors join (64 at a time, spread over the instances) a held room
 *    (`admitPerSecond: 0`) and park in `wait` on their instance;
 * 2. held window (`--held` s): Redis commands/s and Redis CPU % with everyone parked;
 * 3. the room opens at `--rate` a second for `--seconds` s: Redis commands/s and CPU % while the
 *    rest wait; admissions per second (by Redis: each pass's time minus `passTtlMs`, over the
 *    first `--seconds` s after the first admission) against `--rate`; FIFO inversions (pairs
 *    admitted against their order of joining, the tickets Redis gave); position and ETA that
 *    `join` answered 2 s after opening for 50 visitors spread over the line, against when they
 *    were really admitted; ms from a visitor's admission (Redis time) to its `wait` resolving
 *    (same host, so one clock).
 *
 *   node -r ts-node/register/transpile-only bench/waiting-room.ts [--visitors 10000] [--rate 50]
 *     [--seconds 60] [--held 20]
 */
import 'reflect-metadata';
import { loadavg } from 'node:os';
import Redis from 'ioredis';
import { WaitingRoomService } from '../lib';
import { waitingRoomKeys } from '../lib/waiting-room/waiting-room-store';
import { startRedisServer } from '../scripts/redis-server';
import { oursApp } from './adapters/ours-app';
import { median, percentile } from './support/bench-stats';
import { RedisLoadMeter } from './support/redis-load-meter';
import { numberArg } from './support/script-args';

const VISITORS = numberArg('visitors', 10_000);
const RATE = numberArg('rate', 50);
const SECONDS = numberArg('seconds', 60);
const HELD_S = numberArg('held', 20);
const ROOM = 'sale';
const PASS_TTL_MS = 3_600_000;
/** Presence every 5 s: a held window of 20 s has 4 presence rounds in it. */
const ABSENT_MS = 15_000;
const INSTANCES = 3;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const redisNow = async (r: Redis) => {
  const [s, us] = await r.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
};
const fixed = (n: number, d = 1) => n.toFixed(d);
const commandCounts = async (r: Redis) => {
  const counts = new Map<string, number>();
  for (const m of (await r.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    counts.set(m[1], Number(m[2]));
  }
  return counts;
};

async function main(): Promise<void> {
  console.log(
    `load average at start: ${loadavg()
      .map((l) => fixed(l, 2))
      .join(' ')}`,
  );
  const server = await startRedisServer();
  const probe = new Redis(server.url);
  const apps = await Promise.all(
    Array.from({ length: INSTANCES }, () => oursApp({ redis: server.url, keyPrefix: 'bench:' })),
  );
  const rooms = apps.map((app) => app.get(WaitingRoomService));
  const [, line, , passes] = waitingRoomKeys('bench:', ROOM);
  try {
    await rooms[0].open(ROOM, { admitPerSecond: 0, passTtlMs: PASS_TTL_MS, absentMs: ABSENT_MS });
    const visitors = Array.from({ length: VISITORS }, (_, i) => `visitor-${i}`);
    for (let i = 0; i < VISITORS; i += 64) {
      await Promise.all(
        visitors.slice(i, i + 64).map((v, j) => rooms[(i + j) % INSTANCES].join(ROOM, v)),
      );
    }
    const tickets = new Map<string, number>();
    const ranked = await probe.zrange(line, 0, -1, 'WITHSCORES');
    for (let i = 0; i < ranked.length; i += 2) tickets.set(ranked[i], Number(ranked[i + 1]));
    const resolvedAt = new Map<string, number>();
    const waits = visitors.map((v, i) =>
      rooms[i % INSTANCES]
        .wait(ROOM, v, { waitMs: 3_600_000 })
        .then(() => resolvedAt.set(v, Date.now()))
        .catch(() => undefined),
    );
    while (rooms.reduce((n, r) => n + r.localWaiters(ROOM), 0) < VISITORS) await sleep(50);
    console.log(`${VISITORS} visitors parked on ${INSTANCES} instances`);

    const held = await RedisLoadMeter.start(server.url);
    await sleep(HELD_S * 1000);
    const heldLoad = await held.stop();
    console.log(
      `held ${HELD_S} s: ${fixed(heldLoad.commandsPerSec)} Redis commands/s, ${fixed(heldLoad.cpuPct, 2)} % Redis CPU`,
    );

    const before = await commandCounts(probe);
    const moving = await RedisLoadMeter.start(server.url);
    await rooms[1].open(ROOM, {
      admitPerSecond: RATE,
      passTtlMs: PASS_TTL_MS,
      absentMs: ABSENT_MS,
    });
    await sleep(2_000);
    // 50 visitors spread over the line: what join says, and when (Redis time, read just before
    // and just after the call: the truth is compared with the nearest end of that span).
    const sample = await probe.zrange(line, 0, -1);
    const step = Math.max(1, Math.floor(Math.min(sample.length, RATE * (SECONDS - 4)) / 50));
    const asked: Array<{
      visitor: string;
      at: number;
      until: number;
      position: number;
      etaMs: number;
    }> = [];
    for (let k = 1; k <= 50 && k * step < sample.length; k++) {
      const visitor = sample[k * step];
      const at = await redisNow(probe);
      const s = await rooms[k % INSTANCES].join(ROOM, visitor);
      const until = await redisNow(probe);
      if (!s.admitted && s.etaMs !== null) {
        asked.push({ visitor, at, until, position: s.position, etaMs: s.etaMs });
      }
    }
    await sleep(SECONDS * 1000 - 2_000);
    const movingLoad = await moving.stop();
    const after = await commandCounts(probe);
    const top = [...after]
      .map(([c, n]) => [c, ((n - (before.get(c) ?? 0)) / SECONDS).toFixed(1)] as const)
      .filter(([c, n]) => c !== 'info' && Number(n) > 0)
      .sort((a, b) => Number(b[1]) - Number(a[1]));
    console.log(
      `moving at ${RATE}/s, ${SECONDS} s: ${fixed(movingLoad.commandsPerSec)} Redis commands/s, ${fixed(movingLoad.cpuPct, 2)} % Redis CPU`,
    );
    console.log(`  per second: ${top.map(([c, n]) => `${c} ${n}`).join(', ')}`);

    // Admissions by Redis time.
    const admittedPairs = await probe.zrange(passes, 0, -1, 'WITHSCORES');
    const admittedAt = new Map<string, number>();
    for (let i = 0; i < admittedPairs.length; i += 2) {
      admittedAt.set(admittedPairs[i], Number(admittedPairs[i + 1]) - PASS_TTL_MS);
    }
    const times = [...admittedAt.values()].sort((a, b) => a - b);
    const first = times[0];
    const inWindow = times.filter((t) => t < first + SECONDS * 1000).length;
    const measuredRate = inWindow / SECONDS;
    console.log(
      `admitted ${inWindow} in the ${SECONDS} s after the first admission: ${fixed(measuredRate, 2)}/s ` +
        `(target ${RATE}/s, ${fixed(((measuredRate - RATE) / RATE) * 100, 2)} %)`,
    );

    // FIFO: in ticket order, admission times never go back.
    const byTicket = [...admittedAt].sort((a, b) => tickets.get(a[0])! - tickets.get(b[0])!);
    let inversions = 0;
    let latest = -Infinity;
    const sorted: number[] = [];
    for (const [, t] of byTicket) {
      // Pairs (earlier ticket, later ticket) admitted in the wrong order: earlier admissions later than t.
      if (t < latest) {
        let lo = 0;
        let hi = sorted.length;
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          if (sorted[mid] <= t) lo = mid + 1;
          else hi = mid;
        }
        inversions += sorted.length - lo;
      }
      latest = Math.max(latest, t);
      let at = sorted.length;
      sorted.push(t);
      while (at > 0 && sorted[at - 1] > t) {
        sorted[at] = sorted[at - 1];
        at--;
      }
      sorted[at] = t;
    }
    const neverAdmittedAhead = [...tickets].filter(
      ([v, ticket]) => !admittedAt.has(v) && byTicket.some(([w]) => tickets.get(w)! > ticket),
    ).length;
    console.log(
      `FIFO: ${inversions} inversions among ${byTicket.length} admitted (3 instances); ` +
        `${neverAdmittedAhead} visitors passed over`,
    );

    // Position and ETA against the truth.
    /** |value - the nearest end of [low, high]| / the truth. */
    const error = (value: number, low: number, high: number) =>
      value < low ? (low - value) / low : value > high ? (value - high) / high : 0;
    const positionErrors: number[] = [];
    const etaErrors: number[] = [];
    for (const a of asked) {
      const truthAt = admittedAt.get(a.visitor);
      if (truthAt === undefined) continue;
      // Admitted ahead of it (an earlier ticket: a batch admits several in one instant) after
      // the call (fewest) or after the moment before it (most).
      const mine = tickets.get(a.visitor)!;
      const ahead = byTicket.filter(([v]) => tickets.get(v)! < mine).map(([, t]) => t);
      const fewest = ahead.filter((t) => t > a.until).length;
      const most = ahead.filter((t) => t >= a.at).length;
      positionErrors.push(error(a.position, fewest + 1, most + 1));
      etaErrors.push(error(a.etaMs, truthAt - a.until, truthAt - a.at));
    }
    const pct = (x: number) => `${fixed(x * 100, 2)} %`;
    const describe = (errors: number[]) =>
      `median ${pct(median(errors))}, p95 ${pct(percentile(errors, 95))}, max ${pct(Math.max(...errors))}`;
    console.log(
      `position error (${positionErrors.length} visitors, positions ${asked[0]?.position}-` +
        `${asked.at(-1)?.position}): ${describe(positionErrors)}; ETA error: ${describe(etaErrors)}`,
    );

    const latencies = [...resolvedAt].map(([v, at]) => at - admittedAt.get(v)!);
    console.log(
      `admission -> wait resolved (${latencies.length} visitors): p50 ${median(latencies)} ms, ` +
        `p99 ${percentile(latencies, 99)} ms, max ${Math.max(...latencies)} ms`,
    );
    console.log(
      `load average at end: ${loadavg()
        .map((l) => fixed(l, 2))
        .join(' ')}`,
    );
    await rooms[0].close(ROOM);
    void waits;
  } finally {
    await Promise.all(apps.map((app) => app.close()));
    probe.disconnect();
    await server.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
