/**
 * Where a serial acquire + release pair's cost goes: the library at its defaults, against the same
 * two Lua scripts called through ioredis alone (the keys and arguments the library sends, none of
 * its own code), against `SET NX PX` + a minimal compare-and-delete script (what redis-semaphore's
 * Mutex sends). One loop, one key, on one private redis-server, in interleaved rounds (the order
 * of the three rotates each round). Prints per target the median pairs/s, client CPU µs per pair
 * (`process.cpuUsage()`), Redis CPU µs per pair (`INFO cpu`) and, per script, Redis µs per call
 * (`INFO commandstats`, reset before each target). Also the library with `fencing: false`: what
 * the fence costs. The gap between the library's row and the scripts' row is the library's own
 * code; between the last two rows, what its scripts do beyond a plain SET NX (fence, line check).
 *
 *   node -r ts-node/register/transpile-only bench/serial-cost.ts [--rounds 5] [--pairs 10000]
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import Redis from 'ioredis';
import { LockService } from '../lib';
import { lockRedisKeys } from '../lib/lock/lock-keys';
import { LOCK_SCRIPTS } from '../lib/lock/lock-scripts';
import { acquireFlags, lockScriptKeys } from '../lib/lock/lock-store';
import { startRedisServer } from '../scripts/redis-server';
import { RedisLockConnection } from '../lib/redis/redis-connection';
import { oursApp } from './adapters/ours-app';
import { median } from './support/bench-stats';
import { redisCpuUs } from './support/cpu-meter';
import { numberArg } from './support/script-args';

const ROUNDS = Math.max(3, numberArg('rounds', 5));
const PAIRS = numberArg('pairs', 10_000);
const RELEASE_IF_OWNER =
  "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

type Pair = (key: string) => Promise<unknown>;

interface Cell {
  pairsPerSec: number[];
  clientUs: number[];
  redisUs: number[];
  perCall: Map<string, number[]>;
}

const token = () => randomBytes(16).toString('hex');

/** µs per call of each command Redis ran since the last reset (scripts by name). */
async function perCall(admin: Redis, names: Map<string, string>): Promise<Map<string, number>> {
  const info = await admin.info('commandstats');
  const out = new Map<string, number>();
  for (const [command, name] of names) {
    const stats = new RegExp(`cmdstat_${command}:calls=(\\d+),usec=(\\d+)`).exec(info);
    if (stats) out.set(name, Number(stats[2]) / Number(stats[1]));
  }
  return out;
}

async function main(): Promise<void> {
  const server = await startRedisServer();
  const admin = new Redis(server.url);
  const client = new Redis(server.url);
  const app = await oursApp({ redis: server.url });
  const unfenced = await oursApp({ redis: server.url, fencing: false });
  try {
    const locks = app.get(LockService);
    // What the library sends at its defaults: key prefix, TTL, flags, fence counter TTL.
    const { lock: o, fenceTtlMs } = app.get(RedisLockConnection).options;
    const flags = acquireFlags(o.fencing, o.fair, 'none');
    const unfencedLocks = unfenced.get(LockService);
    const releaseSha = (await client.script('LOAD', RELEASE_IF_OWNER)) as string;
    const targets: { name: string; pair: Pair; commands: Map<string, string> }[] = [
      {
        name: 'the library (acquire + release, defaults)',
        pair: async (key) => (await locks.acquire(key)).release(),
        commands: new Map([['evalsha', 'its two scripts (mean per call)']]),
      },
      {
        name: 'the library, fencing: false',
        pair: async (key) => (await unfencedLocks.acquire(key)).release(),
        commands: new Map([['evalsha', 'its two scripts (mean per call)']]),
      },
      {
        name: 'its two scripts through ioredis alone',
        pair: async (key) => {
          const keys = [lockRedisKeys(o.keyPrefix, key)];
          const t = token();
          await LOCK_SCRIPTS.acquire.run(client, lockScriptKeys(keys), [
            t,
            o.ttlMs,
            flags,
            fenceTtlMs,
          ]);
          await LOCK_SCRIPTS.release.run(client, lockScriptKeys(keys), [t, 0, fenceTtlMs]);
        },
        commands: new Map([['evalsha', 'the two scripts (mean per call)']]),
      },
      {
        name: 'SET NX PX + compare-and-delete script',
        pair: async (key) => {
          const t = token();
          await client.set(`plain:${key}`, t, 'PX', o.ttlMs, 'NX');
          await client.evalsha(releaseSha, 1, `plain:${key}`, t);
        },
        commands: new Map([
          ['set', 'SET NX PX'],
          ['evalsha', 'release script'],
        ]),
      },
    ];
    const cells = targets.map((): Cell => ({
      pairsPerSec: [],
      clientUs: [],
      redisUs: [],
      perCall: new Map(),
    }));
    // Unmeasured warm-up of every path (JIT, scripts loaded).
    for (const t of targets) for (let i = 0; i < 1_000; i++) await t.pair('warm');
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < targets.length; k++) {
        const index = (k + round) % targets.length;
        const target = targets[index];
        const cell = cells[index];
        await admin.config('RESETSTAT');
        const redisBefore = await redisCpuUs(admin);
        const cpu = process.cpuUsage();
        const start = process.hrtime.bigint();
        for (let i = 0; i < PAIRS; i++) await target.pair(`serial:${index}`);
        const sec = Number(process.hrtime.bigint() - start) / 1e9;
        const used = process.cpuUsage(cpu);
        const redisUsed = (await redisCpuUs(admin)) - redisBefore;
        cell.pairsPerSec.push(PAIRS / sec);
        cell.clientUs.push((used.user + used.system) / PAIRS);
        cell.redisUs.push(redisUsed / PAIRS);
        for (const [name, us] of await perCall(admin, target.commands)) {
          cell.perCall.set(name, [...(cell.perCall.get(name) ?? []), us]);
        }
      }
    }
    console.log(`${ROUNDS} interleaved rounds of ${PAIRS} serial pairs, medians:`);
    targets.forEach((t, i) => {
      const c = cells[i];
      const calls = [...c.perCall]
        .map(([name, us]) => `${name} ${median(us).toFixed(2)} µs`)
        .join(', ');
      console.log(
        `  ${t.name.padEnd(42)} ${median(c.pairsPerSec).toFixed(0).padStart(6)} pairs/s, ` +
          `client ${median(c.clientUs).toFixed(1).padStart(5)} µs/pair, ` +
          `Redis ${median(c.redisUs).toFixed(1).padStart(5)} µs/pair (${calls})`,
      );
    });
  } finally {
    await app.close();
    await unfenced.close();
    client.disconnect();
    admin.disconnect();
    await server.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
