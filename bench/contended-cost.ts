/**
 * Where the Redis CPU of a contended section goes, in counts the machine's load does not move:
 * `--processes` instances of each library of `--libraries` (each its own connections, as separate
 * processes would have; all in this Node process) loop on one key of a dedicated redis-server for
 * `--seconds`, each section acquire → `MULTI INCR` → sleep `--hold` ms → `DECR` → release, as in
 * the bench's contended shape (bench/shapes/contended.shape.ts). Per section: INFO commandstats
 * calls of each command (the sections' own MULTI/INCR/DECR included; commands inside scripts
 * counted too), and the server's CPU (`INFO cpu`). The libraries take turns, `--rounds` times.
 *
 * Call counts do not depend on the machine's load; the server's CPU per section does, less than
 * wall time (every I/O event costs it system time), and commandstats' `usec` is wall time of the
 * command, which a loaded machine inflates by descheduling the server mid-script.
 *
 * `--libraries` takes the bench's lock library ids and `fair-floor` (bench/adapters/fair-floor.adapter.ts).
 *
 *   node -r ts-node/register/transpile-only bench/contended-cost.ts [--libraries ours,original]
 *     [--processes 8] [--seconds 4] [--hold 1] [--rounds 1] [--url redis://…] [--callgrind]
 */
import Redis from 'ioredis';
import { lockLibrary } from './adapters/lock-libraries';
import { startRedisServer } from '../scripts/redis-server';
import { callgrindServer } from './support/callgrind-server';
import { redisCpuUs } from './support/cpu-meter';
import { numberArg } from './support/script-args';

const PROCESSES = numberArg('processes', 8);
const SECONDS = numberArg('seconds', 4);
const HOLD_MS = numberArg('hold', 1);
const ROUNDS = numberArg('rounds', 1);
const option = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};

/** Calls per command since the last CONFIG RESETSTAT (the measuring's own left out). */
async function commandCalls(redis: Redis): Promise<Map<string, number>> {
  const info = await redis.info('commandstats');
  const calls = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1], Number(m[2]));
  for (const own of ['info', 'config|resetstat', 'flushall']) calls.delete(own);
  return calls;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One library's contended run: per-section command calls and server CPU, and fairness. */
async function measure(id: string, url: string, admin: Redis, round: number): Promise<string> {
  const { create } = lockLibrary(id);
  const adapters = await Promise.all(Array.from({ length: PROCESSES }, () => create(url)));
  const markers = adapters.map(() => new Redis(url));
  const run = async (ms: number, key: string) => {
    const until = Date.now() + ms;
    return Promise.all(
      adapters.map(async (adapter, i) => {
        let sections = 0;
        while (Date.now() < until) {
          const lock = await adapter.acquire(key).catch(() => undefined);
          if (!lock) continue;
          await markers[i].multi().incr(`${key}:inside`).incr(`${key}:counter`).exec();
          await sleep(HOLD_MS);
          await markers[i].decr(`${key}:inside`);
          await adapter.release(lock);
          sections++;
        }
        return sections;
      }),
    );
  };
  await run(500, `warm:${id}:${round}`);
  await admin.config('RESETSTAT');
  const cpu0 = await redisCpuUs(admin);
  const counts = await run(SECONDS * 1000, `contended:${id}:${round}`);
  const cpu = (await redisCpuUs(admin)) - cpu0;
  const calls = await commandCalls(admin);
  await Promise.all(adapters.map((a) => a.close()));
  markers.forEach((m) => m.disconnect());
  const sections = counts.reduce((a, b) => a + b, 0);
  const jain = sections ** 2 / (counts.length * counts.reduce((a, b) => a + b * b, 0));
  const sorted = [...calls].sort((a, b) => b[1] - a[1]);
  const total = sorted.reduce((a, [, n]) => a + n, 0);
  const per = (n: number) => (n / sections).toFixed(2);
  return (
    `${id}: ${sections} sections, Jain ${jain.toFixed(3)}, server CPU ${(cpu / sections).toFixed(1)} µs/section, ` +
    `${per(total)} commands/section: ${sorted.map(([c, n]) => `${c} ${per(n)}`).join(', ')}`
  );
}

async function main(): Promise<void> {
  const grind = process.argv.includes('--callgrind') ? await callgrindServer() : undefined;
  const url = option('url') ?? grind?.url;
  const server = url ? undefined : await startRedisServer();
  const admin = new Redis(url ?? server!.url);
  const ids = (option('libraries') ?? 'ours').split(',');
  for (let round = 0; round < ROUNDS; round++) {
    for (const id of ids) {
      grind?.zero();
      const line = await measure(id, url ?? server!.url, admin, round);
      const counted = grind
        ? `, ${(grind.instructions() / sectionsOf(line) / 1000).toFixed(0)} k instructions/section`
        : '';
      console.log(line.replace(/(\d+) sections,/, `$1 sections${counted},`));
    }
  }
  admin.disconnect();
  await server?.stop();
  await grind?.stop();
}

const sectionsOf = (line: string) => Number(/(\d+) sections/.exec(line)![1]);

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
