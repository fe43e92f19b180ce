/**
 * Where a serial consume's cost goes, on one private redis-server, in interleaved rounds (the
 * order rotates each round), medians: for each target the consumes/s of one loop, client CPU µs
 * (`process.cpuUsage()`), Redis CPU µs (`INFO cpu`) and the script's own µs per call
 * (`INFO commandstats`, reset before each target) per consume, over 1,000 keys at a limit every
 * call fits in (as bench/rate-limit.ts). Targets: a bare PING and a bare EVALSHA (the round-trip
 * floor any one-call-per-consume library pays), the library's script (one check per call) and the trimmed variants of
 * the sliding window in bench/rate-limit-variants/ called through ioredis alone (one change each),
 * rate-limiter-flexible's script the same way, and both libraries through their own API.
 *
 *   node -r ts-node/register/transpile-only bench/rate-limit-profile.ts [--rounds 5] [--calls 20000]
 */
import 'reflect-metadata';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { RateLimiterService } from '../lib';
import { CONSUME_SCRIPT } from '../lib/rate-limit/rate-limit-scripts';
import { startRedisServer } from '../scripts/redis-server';
import { oursApp } from './adapters/ours-app';
import { median } from './support/bench-stats';
import { redisCpuUs } from './support/cpu-meter';
import { numberArg } from './support/script-args';

const ROUNDS = Math.max(3, numberArg('rounds', 5));
const CALLS = numberArg('calls', 20_000);
const KEYS = 1_000;
const LIMIT = 100_000;
const WINDOW_MS = 60_000;
const VARIANTS = join(__dirname, 'rate-limit-variants');

type Consume = (i: number) => Promise<unknown>;
interface Cell {
  perSec: number[];
  clientUs: number[];
  redisUs: number[];
  scriptUs: number[];
}

async function scriptUsPerCall(probe: Redis): Promise<number> {
  const stats = await probe.info('commandstats');
  const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(stats);
  return m ? Number(m[2]) / Number(m[1]) : NaN;
}

async function measure(probe: Redis, consume: Consume): Promise<[number, number, number, number]> {
  await probe.flushall();
  await probe.config('RESETSTAT');
  const redisBefore = await redisCpuUs(probe);
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < CALLS; i++) await consume(i);
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const redisUs = (await redisCpuUs(probe)) - redisBefore;
  return [
    CALLS / seconds,
    (cpu.user + cpu.system) / CALLS,
    redisUs / CALLS,
    await scriptUsPerCall(probe),
  ];
}

async function main(): Promise<void> {
  const server = await startRedisServer();
  const probe = new Redis(server.url);
  const client = new Redis(server.url);
  const app = await oursApp({ redis: server.url, keyPrefix: 'bench:' });
  const limiter = app.get(RateLimiterService);
  const flexible = new RateLimiterRedis({
    storeClient: client,
    points: LIMIT,
    duration: WINDOW_MS / 1000,
    keyPrefix: 'rlflx',
  });
  const shas = new Map<string, string>();
  const load = async (name: string, source: string) =>
    shas.set(name, (await client.script('LOAD', source)) as string);
  for (const f of readdirSync(VARIANTS).filter((f) => f.endsWith('.lua'))) {
    await load(f.replace('.lua', ''), readFileSync(join(VARIANTS, f), 'utf8'));
  }
  await load('ours: consume.lua', CONSUME_SCRIPT.source);
  const evalsha = (
    name: string,
    args: (i: number) => (string | number)[],
    kind = 'rate',
  ): Consume => {
    const sha = shas.get(name)!;
    return (i) => client.evalsha(sha, 1, `bench:${kind}:{user:${i % KEYS}}`, ...args(i));
  };
  const swArgs = (i: number) => [LIMIT, WINDOW_MS, 1, `p${i.toString(36)}`];
  const targets: Record<string, Consume> = {
    PING: () => client.ping(),
    'EVALSHA, empty script': evalsha('empty', swArgs),
    'EVALSHA, TIME only': evalsha('time-only', swArgs),
    'script: rate-limiter-flexible': (i) =>
      client.evalsha(shas.get('flexible')!, 1, `rlflx:user:${i % KEYS}`, 1, 60, LIMIT, 60),
    'script: ours, sliding window': evalsha('ours: consume.lua', (i) => [
      's',
      LIMIT,
      WINDOW_MS,
      1,
      `p${i.toString(36)}`,
    ]),
    'variant: sliding window before (number args)': evalsha('sw-before', swArgs),
    'variant: no PEXPIRE': evalsha('sw-no-pexpire', swArgs),
    'variant: no ZREMRANGEBYSCORE': evalsha('sw-no-trim', swArgs),
    'variant: no TIME (client time)': evalsha('sw-no-time', (i) => [...swArgs(i), Date.now()]),
    'variant: plain member': evalsha('sw-plain-member', swArgs),
    'script: ours, token bucket': evalsha(
      'ours: consume.lua',
      () => ['t', LIMIT, WINDOW_MS, 1, ''],
      'bucket',
    ),
    'variant: token bucket before (number args)': evalsha(
      'tb-before',
      () => [LIMIT, WINDOW_MS, 1],
      'bucket-hash',
    ),
    'API: rate-limiter-flexible consume': (i) => flexible.consume(`user:${i % KEYS}`, 1),
    'API: ours, sliding window': (i) =>
      limiter.consume(`user:${i % KEYS}`, { limit: LIMIT, windowMs: WINDOW_MS }),
    'API: ours, token bucket': (i) =>
      limiter.consume(`user:${i % KEYS}`, {
        limit: LIMIT,
        windowMs: WINDOW_MS,
        algorithm: 'token-bucket',
      }),
  };
  const only = process.argv.indexOf('--only');
  const names = Object.keys(targets).filter(
    (n) => only < 0 || new RegExp(process.argv[only + 1]).test(n),
  );
  const cells = new Map<string, Cell>(
    names.map((n) => [n, { perSec: [], clientUs: [], redisUs: [], scriptUs: [] }]),
  );
  for (const n of names) for (let i = 0; i < 2_000; i++) await targets[n](i); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    for (let j = 0; j < names.length; j++) {
      const n = names[(j + round) % names.length];
      const [perSec, clientUs, redisUs, scriptUs] = await measure(probe, targets[n]);
      const c = cells.get(n)!;
      c.perSec.push(perSec);
      c.clientUs.push(clientUs);
      c.redisUs.push(redisUs);
      c.scriptUs.push(scriptUs);
    }
    process.stderr.write(`round ${round + 1}/${ROUNDS}\n`);
  }
  console.log(
    `\nserial consume cost: ${CALLS} calls per target, ${KEYS} keys, medians of ${ROUNDS} interleaved rounds`,
  );
  console.log(
    '| target | calls/s | client µs/call | Redis CPU µs/call | EVALSHA µs/call (commandstats) |',
  );
  console.log('|---|---:|---:|---:|---:|');
  for (const n of names) {
    const c = cells.get(n)!;
    const s = median(c.scriptUs);
    console.log(
      `| ${n} | ${median(c.perSec).toFixed(0)} | ${median(c.clientUs).toFixed(1)} | ` +
        `${median(c.redisUs).toFixed(1)} | ${Number.isNaN(s) ? '-' : s.toFixed(2)} |`,
    );
  }
  await app.close();
  client.disconnect();
  probe.disconnect();
  await server.stop();
}

void main();
