/**
 * What waiting costs when nobody else wants the lock: acquire + release pairs on free keys with
 * `waitMs: 0` (a try) and with `waitMs: 600000` (a waiting acquire), in interleaved rounds on one
 * private redis-server. Each mode has its own Nest application with that `waitMs` as the module's
 * default (`acquire(key)` without options, as the bench calls it; `--per-call` passes
 * `{ waitMs }` to one application instead), and `--unfair` sets `fair: false`. Both run the serial shape (one loop, one key) and
 * the parallel-64 shape (64 loops in one process, a key each). Prints per mode and shape the
 * median pairs/s, client CPU µs per pair and Redis commands per pair (INFO commandstats, the
 * script's own INFO calls excluded) over the rounds; the order of the two modes flips every round.
 *
 *   node -r ts-node/register/transpile-only bench/wait-vs-try.ts [--rounds 6] [--pairs 3000]
 */
import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import Redis from 'ioredis';
import { LockService } from '../lib';
import { startRedisServer } from '../scripts/redis-server';
import { oursApp } from './adapters/ours-app';
import { median } from './support/bench-stats';
import { numberArg } from './support/script-args';

const ROUNDS = Math.max(5, numberArg('rounds', 6));
const PAIRS = numberArg('pairs', 3_000);
const PARALLEL = 64;
const MODES = [
  { name: 'try  (waitMs: 0)     ', waitMs: 0 },
  { name: 'wait (waitMs: 600000)', waitMs: 600_000 },
] as const;
const SHAPES = ['serial', 'parallel-64'] as const;
const PER_CALL = process.argv.includes('--per-call');
const FAIR = !process.argv.includes('--unfair');

interface Cell {
  pairsPerSec: number[];
  cpuUsPerPair: number[];
  commandsPerPair: number[];
}

/** `pairs` acquire + release pairs in `loops` concurrent loops, each on a key of its own. */
async function run(
  locks: LockService,
  waitMs: number | undefined,
  loops: number,
  pairs: number,
  prefix: string,
): Promise<void> {
  const per = Math.ceil(pairs / loops);
  await Promise.all(
    Array.from({ length: loops }, async (_, i) => {
      const key = `${prefix}:${i}`;
      const options = waitMs === undefined ? undefined : { waitMs };
      for (let n = 0; n < per; n++) await (await locks.acquire(key, options)).release();
    }),
  );
}

/** Commands Redis has run so far (every command in INFO commandstats). */
async function commands(admin: Redis): Promise<number> {
  const info = await admin.info('commandstats');
  let total = 0;
  for (const m of info.matchAll(/calls=(\d+)/g)) total += Number(m[1]);
  return total;
}

async function main(): Promise<void> {
  const server = await startRedisServer();
  const admin = new Redis(server.url);
  const apps: INestApplicationContext[] = [];
  try {
    const shared = PER_CALL ? await oursApp({ redis: server.url, fair: FAIR }) : undefined;
    if (shared) apps.push(shared);
    const services = new Map<number, LockService>();
    for (const m of MODES) {
      let app = shared;
      if (!app) {
        app = await oursApp({ redis: server.url, fair: FAIR, waitMs: m.waitMs });
        apps.push(app);
      }
      services.set(m.waitMs, app.get(LockService));
    }
    const locksOf = (waitMs: number) => services.get(waitMs)!;
    const callWait = (waitMs: number) => (PER_CALL ? waitMs : undefined);
    const cells = new Map<string, Cell>();
    for (const m of MODES) {
      for (const s of SHAPES)
        cells.set(`${m.name}|${s}`, { pairsPerSec: [], cpuUsPerPair: [], commandsPerPair: [] });
      // Unmeasured warm-up of both paths (JIT, scripts loaded).
      await run(locksOf(m.waitMs), callWait(m.waitMs), 1, 500, 'warm');
      await run(locksOf(m.waitMs), callWait(m.waitMs), PARALLEL, 2_000, 'warm');
    }
    for (let round = 0; round < ROUNDS; round++) {
      for (const s of SHAPES) {
        for (const m of round % 2 === 0 ? MODES : [...MODES].reverse()) {
          const loops = s === 'serial' ? 1 : PARALLEL;
          const pairs = Math.ceil(PAIRS / loops) * loops;
          const before = await commands(admin);
          const cpu = process.cpuUsage();
          const start = process.hrtime.bigint();
          await run(locksOf(m.waitMs), callWait(m.waitMs), loops, pairs, `${s}:${m.waitMs}`);
          const sec = Number(process.hrtime.bigint() - start) / 1e9;
          const used = process.cpuUsage(cpu);
          // The INFO that read `before` is counted in the second reading: one command.
          const sent = (await commands(admin)) - before - 1;
          const cell = cells.get(`${m.name}|${s}`)!;
          cell.pairsPerSec.push(pairs / sec);
          cell.cpuUsPerPair.push((used.user + used.system) / pairs);
          cell.commandsPerPair.push(sent / pairs);
        }
      }
    }
    const how = PER_CALL ? 'waitMs per call' : 'waitMs as the module default';
    console.log(`${ROUNDS} interleaved rounds of ${PAIRS} pairs (${how}, fair: ${FAIR}), medians:`);
    for (const s of SHAPES) {
      for (const m of MODES) {
        const c = cells.get(`${m.name}|${s}`)!;
        console.log(
          `  ${s.padEnd(11)} ${m.name}: ${median(c.pairsPerSec).toFixed(0).padStart(6)} pairs/s, ` +
            `${median(c.cpuUsPerPair).toFixed(1).padStart(5)} client CPU µs/pair, ` +
            `${median(c.commandsPerPair).toFixed(2)} Redis commands/pair ` +
            `(pairs/s ${c.pairsPerSec.map((v) => v.toFixed(0)).join(' ')})`,
        );
      }
    }
  } finally {
    await Promise.all(apps.map((a) => a.close()));
    admin.disconnect();
    await server.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
