/**
 * The cost of the OpenTelemetry instrumentation when the application has `@opentelemetry/api`
 * but registered no SDK (the default): the serial shape (one client, acquire + release on one
 * free key) in alternating rounds of two Nest applications on one private redis-server:
 *   (a) api present, no SDK: the library looked its meter and tracer up and found none;
 *   (b) the module's internal switch off: no OpenTelemetry call at all.
 * Prints per mode the median pairs/s and client CPU µs/pair over the rounds, and the overhead %.
 * Also prints what one `startSpan` + `end` on the API's no-op tracer costs (the call the library
 * skips by looking the tracer up once).
 *
 *   node -r ts-node/register/transpile-only bench/otel-overhead.ts [--rounds 10] [--pairs 2000]
 */
import 'reflect-metadata';
import { trace } from '@opentelemetry/api';
import type { INestApplicationContext } from '@nestjs/common';
import { LockService } from '../lib';
import { instrumentation } from '../lib/observability/otel';
import { startRedisServer } from '../scripts/redis-server';
import { oursApp } from './adapters/ours-app';
import { median } from './support/bench-stats';
import { numberArg } from './support/script-args';

const ROUNDS = Math.max(10, numberArg('rounds', 10));
const PAIRS = numberArg('pairs', 2_000);

interface Mode {
  name: string;
  app: INestApplicationContext;
  pairsPerSec: number[];
  cpuUsPerPair: number[];
}

/** An application whose services look OpenTelemetry up with the switch set to `enabled`. */
async function app(url: string, enabled: boolean): Promise<INestApplicationContext> {
  instrumentation.enabled = enabled;
  const made = await oursApp({ redis: url, keyPrefix: enabled ? 'a:' : 'b:' });
  // The first acquisition makes the lookups (meter, tracer): from then on they are cached.
  await serial(made.get(LockService), 200);
  instrumentation.enabled = true;
  return made;
}

async function serial(locks: LockService, pairs: number): Promise<void> {
  for (let i = 0; i < pairs; i++) await (await locks.acquire('serial')).release();
}

/** ns per `startSpan` + `end` on the API's tracer with no SDK registered. */
function noopSpanNs(): number {
  const tracer = trace.getTracer('bench');
  const n = 1_000_000;
  for (let i = 0; i < 10_000; i++) tracer.startSpan('warm').end();
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) tracer.startSpan('redis_lock.acquire').end();
  return Number(process.hrtime.bigint() - start) / n;
}

async function main(): Promise<void> {
  const server = await startRedisServer();
  const modes: Mode[] = [];
  try {
    for (const [name, enabled] of [
      ['(a) api, no SDK', true],
      ['(b) switch off', false],
    ] as const) {
      modes.push({ name, app: await app(server.url, enabled), pairsPerSec: [], cpuUsPerPair: [] });
    }
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate which mode goes first, so drift on the machine hits both alike.
      for (const mode of round % 2 === 0 ? modes : [...modes].reverse()) {
        const locks = mode.app.get(LockService);
        const cpu = process.cpuUsage();
        const start = process.hrtime.bigint();
        await serial(locks, PAIRS);
        const sec = Number(process.hrtime.bigint() - start) / 1e9;
        const used = process.cpuUsage(cpu);
        mode.pairsPerSec.push(PAIRS / sec);
        mode.cpuUsPerPair.push((used.user + used.system) / PAIRS);
      }
    }
    const [a, b] = modes.map((m) => ({
      name: m.name,
      pairs: median(m.pairsPerSec),
      cpu: median(m.cpuUsPerPair),
    }));
    console.log(`serial shape, ${ROUNDS} alternating rounds of ${PAIRS} pairs, medians:`);
    for (const m of [a, b]) {
      console.log(
        `  ${m.name}: ${m.pairs.toFixed(0)} pairs/s, ${m.cpu.toFixed(1)} client CPU µs/pair`,
      );
    }
    const pct = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(2)} %`;
    console.log(
      `overhead of (a) over (b): throughput ${pct((b.pairs / a.pairs - 1) * 100)}, ` +
        `client CPU ${pct((a.cpu / b.cpu - 1) * 100)}`,
    );
    console.log(`no-op tracer startSpan + end (no SDK): ${noopSpanNs().toFixed(0)} ns per span`);
  } finally {
    await Promise.all(modes.map((m) => m.app.close()));
    await server.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
