/**
 * What Sentinel's safe default costs: acquire + release pairs against a master with one replica
 * (and three sentinels; test/support/redis-sentinel.ts), with the default (`waitForReplicas`
 * unset: the lock waits for the replica, `WAIT 1 500` behind an extension right after each grant)
 * and with `waitForReplicas: false` (no wait), in interleaved rounds (the order of the two modes
 * flips every round). Shapes:
 * - serial: one loop, one key, `--pairs` pairs;
 * - contended: `--instances` application instances (each its own connections, as separate
 *   processes would have), one loop each, on one shared key, for `--seconds`; a pair is
 *   acquire (waitMs 10000) + release, so the figure is handoffs per second.
 * Prints per mode and shape the median over the rounds with the min–max range, and the `WAIT`
 * commands Redis ran per pair (INFO commandstats) to show that the default did wait.
 *
 *   node -r ts-node/register/transpile-only bench/replica-wait.ts [--rounds 5] [--pairs 2000]
 *     [--instances 4] [--seconds 3]
 */
import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import Redis from 'ioredis';
import { LockService, type RedisLockModuleOptions } from '../lib';
import { startRedisSentinel } from '../test/support/redis-sentinel';
import { oursApp } from './adapters/ours-app';
import { median } from './support/bench-stats';
import { numberArg } from './support/script-args';

const ROUNDS = Math.max(3, numberArg('rounds', 5));
const PAIRS = numberArg('pairs', 2_000);
const INSTANCES = numberArg('instances', 4);
const SECONDS = numberArg('seconds', 3);
const MODES = [
  { name: 'default (waits for the replica)', options: {} },
  { name: 'waitForReplicas: false         ', options: { waitForReplicas: false as const } },
];
const SHAPES = ['serial pairs/s', 'contended handoffs/s'] as const;

async function waits(admin: Redis): Promise<number> {
  const stats = await admin.info('commandstats');
  return Number(/cmdstat_wait:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

async function main(): Promise<void> {
  const sentinel = await startRedisSentinel();
  const admin = new Redis({ port: await sentinel.currentMaster(), host: '127.0.0.1' });
  const apps: INestApplicationContext[] = [];
  const instances = async (options: RedisLockModuleOptions) => {
    const made = await Promise.all(
      Array.from({ length: INSTANCES }, () =>
        oursApp({ redis: { sentinels: sentinel.sentinels, name: sentinel.name }, ...options }),
      ),
    );
    apps.push(...made);
    return made.map((a) => a.get(LockService));
  };
  try {
    const modes = await Promise.all(
      MODES.map(async (m) => ({ ...m, locks: await instances(m.options) })),
    );
    const results = new Map<string, { rate: number[]; waits: number[] }>();
    const cell = (mode: string, shape: string) => {
      const key = `${mode} | ${shape}`;
      if (!results.has(key)) results.set(key, { rate: [], waits: [] });
      return results.get(key)!;
    };
    // Warm-up, unmeasured.
    for (const m of modes) {
      for (const locks of m.locks)
        for (let i = 0; i < 300; i++) await (await locks.acquire('warm')).release();
    }
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? modes : [...modes].reverse();
      for (const m of order) {
        // serial
        let w0 = await waits(admin);
        let t0 = process.hrtime.bigint();
        for (let i = 0; i < PAIRS; i++)
          await (await m.locks[0].acquire(`serial:${round}`)).release();
        let s = Number(process.hrtime.bigint() - t0) / 1e9;
        let c = cell(m.name, SHAPES[0]);
        c.rate.push(PAIRS / s);
        c.waits.push(((await waits(admin)) - w0) / PAIRS);
        // contended
        w0 = await waits(admin);
        let pairs = 0;
        const end = Date.now() + SECONDS * 1_000;
        t0 = process.hrtime.bigint();
        await Promise.all(
          m.locks.map(async (locks) => {
            while (Date.now() < end) {
              const lock = await locks.acquire(`contended:${round}`, { waitMs: 10_000 });
              await lock.release();
              pairs++;
            }
          }),
        );
        s = Number(process.hrtime.bigint() - t0) / 1e9;
        c = cell(m.name, SHAPES[1]);
        c.rate.push(pairs / s);
        c.waits.push(((await waits(admin)) - w0) / pairs);
      }
    }
    console.log(
      `master + 1 replica + 3 sentinels; ${ROUNDS} interleaved rounds; serial ${PAIRS} pairs; ` +
        `contended ${INSTANCES} instances x ${SECONDS} s`,
    );
    for (const shape of SHAPES) {
      for (const m of MODES) {
        const c = cell(m.name, shape);
        const fmt = (x: number) => x.toFixed(0);
        console.log(
          `${shape.padEnd(21)} ${m.name}  median ${fmt(median(c.rate))}  ` +
            `(${fmt(Math.min(...c.rate))}-${fmt(Math.max(...c.rate))})  WAIT/pair ${median(c.waits).toFixed(2)}`,
        );
      }
    }
  } finally {
    admin.disconnect();
    await Promise.all(apps.map((a) => a.close()));
    await sentinel.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
