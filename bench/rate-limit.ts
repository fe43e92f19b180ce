/**
 * The rate limiter against rate-limiter-flexible's `RateLimiterRedis`, on one private
 * redis-server, in interleaved rounds (the order of the targets rotates each round): consumes/s,
 * client CPU µs per consume (`process.cpuUsage()`) and Redis CPU µs per consume (`INFO cpu`), one
 * loop (serial) and 64 loops (parallel), over 1,000 keys at a limit every call fits in (the cost
 * of the check, not of refusals). Targets: ours with the sliding window (exact: a log per key),
 * ours with the token bucket (two numbers per key), rate-limiter-flexible (a fixed window: one
 * counter per key and window; its own Lua script through ioredis), and the floor of one round
 * trip per consume: a bare PING and EVALSHA of an empty script (no library can do a serial
 * consume in one round trip faster). Exactness is a test's job
 * (test/rate-limit/rate-limit-processes.spec.ts: 4 processes x 8 callers, 3 rounds, single node
 * and Cluster, every admission read back).
 *
 *   node -r ts-node/register/transpile-only bench/rate-limit.ts [--rounds 5] [--calls 20000]
 */
import 'reflect-metadata';
import Redis from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { RateLimiterService } from '../lib';
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

type Consume = (key: string) => Promise<unknown>;
interface Cell {
  perSec: number[];
  clientUs: number[];
  redisUs: number[];
}

async function measure(
  probe: Redis,
  consume: Consume,
  loops: number,
): Promise<[number, number, number]> {
  const perLoop = Math.ceil(CALLS / loops);
  const redisBefore = await redisCpuUs(probe);
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: loops }, async (_, loop) => {
      for (let i = 0; i < perLoop; i++) await consume(`user:${(loop * perLoop + i) % KEYS}`);
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const redisUs = (await redisCpuUs(probe)) - redisBefore;
  const calls = perLoop * loops;
  return [calls / seconds, (cpu.user + cpu.system) / calls, redisUs / calls];
}

async function main(): Promise<void> {
  const server = await startRedisServer();
  const probe = new Redis(server.url);
  const app = await oursApp({ redis: server.url, keyPrefix: 'bench:' });
  const limiter = app.get(RateLimiterService);
  const client = new Redis(server.url);
  const flexible = new RateLimiterRedis({
    storeClient: client,
    points: LIMIT,
    duration: WINDOW_MS / 1000,
    keyPrefix: 'rlflx',
  });
  // The floor of any library that makes one round trip per consume: a bare PING, and EVALSHA
  // of a script that does nothing (same key and 5 arguments as ours).
  const emptySha = (await client.script('LOAD', 'return 1')) as string;
  const targets: Record<string, Consume> = {
    'ours, sliding window': (key) => limiter.consume(key, { limit: LIMIT, windowMs: WINDOW_MS }),
    'ours, token bucket': (key) =>
      limiter.consume(key, { limit: LIMIT, windowMs: WINDOW_MS, algorithm: 'token-bucket' }),
    'rate-limiter-flexible (fixed window)': (key) => flexible.consume(key, 1),
    'floor: PING': () => client.ping(),
    'floor: EVALSHA of an empty script': (key) =>
      client.evalsha(emptySha, 1, key, 's', LIMIT, WINDOW_MS, 1, 'id'),
  };
  const names = Object.keys(targets);
  const FLEXIBLE = 'rate-limiter-flexible (fixed window)';
  const cells = new Map<string, Cell>();
  for (const loops of [1, 64])
    for (const n of names) cells.set(`${n}|${loops}`, { perSec: [], clientUs: [], redisUs: [] });
  // Warm-up: scripts loaded, JIT.
  for (const n of names) await measure(probe, targets[n], 8);
  for (let round = 0; round < ROUNDS; round++) {
    for (const loops of [1, 64]) {
      for (let i = 0; i < names.length; i++) {
        const n = names[(i + round) % names.length];
        await probe.flushall();
        const [perSec, clientUs, redisUs] = await measure(probe, targets[n], loops);
        const cell = cells.get(`${n}|${loops}`)!;
        cell.perSec.push(perSec);
        cell.clientUs.push(clientUs);
        cell.redisUs.push(redisUs);
      }
    }
    process.stderr.write(`round ${round + 1}/${ROUNDS}\n`);
  }
  console.log(
    `\nrate limit: ${CALLS} consumes per target and shape, ${KEYS} keys, medians of ${ROUNDS} interleaved rounds`,
  );
  console.log(
    '| target | loops | consumes/s | client µs/consume | Redis µs/consume | consumes/s vs rate-limiter-flexible |',
  );
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const loops of [1, 64]) {
    const base = median(cells.get(`${FLEXIBLE}|${loops}`)!.perSec);
    for (const n of names) {
      const c = cells.get(`${n}|${loops}`)!;
      console.log(
        `| ${n} | ${loops} | ${median(c.perSec).toFixed(0)} | ${median(c.clientUs).toFixed(1)} | ` +
          `${median(c.redisUs).toFixed(1)} | ${(median(c.perSec) / base).toFixed(2)}x |`,
      );
    }
  }
  await app.close();
  client.disconnect();
  probe.disconnect();
  await server.stop();
}

void main();
