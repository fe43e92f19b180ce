/**
 * What routing by name costs a worker: draining the same tasks (half named 'a', half 'b') with
 *   (u)  one unnamed handler of concurrency 8,
 *   (n1) one named handler 'a' of concurrency 8, the tasks all named 'a' (routing alone), and
 *   (n2) two named handlers, 'a' and 'b', of concurrency 4 each (one claim loop of 8 slots: a
 *        claimed task whose name runs 4 already waits for a slot of its name, holding a loop slot),
 * in alternating rounds (the order flips every round) on one private redis-server. The handler
 * holds each task for `--holdMs` (default 1: an await of a timer, so that tasks of one name
 * overlap). Prints per mode the median tasks/s and client CPU µs/task, the ratio n/u of the time
 * per task against (u), and the peak of tasks of one name running at once (n2: must be 4).
 *
 *   node -r ts-node/register/transpile-only bench/named-handlers.ts [--rounds 10] [--tasks 4000] [--holdMs 1]
 */
import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { QueueService, RedisLockEvents } from '../lib';
import { startRedisServer } from '../scripts/redis-server';
import { oursApp } from './adapters/ours-app';
import { median } from './support/bench-stats';
import { numberArg } from './support/script-args';

const ROUNDS = Math.max(10, numberArg('rounds', 10));
const TASKS = numberArg('tasks', 4_000);
const HOLD_MS = numberArg('holdMs', 1);

/** How a mode's worker is made: one unnamed handler, one named one, or two named ones. */
type Shape = 'unnamed' | 'one-name' | 'two-names';

interface Mode {
  name: string;
  named: Shape;
  tasksPerSec: number[];
  cpuUsPerTask: number[];
  peaks: number[];
}

/** Drains `TASKS` tasks of a fresh queue in `mode`; returns seconds, CPU µs and the peak per name. */
async function drain(
  app: INestApplicationContext,
  queue: string,
  named: Shape,
): Promise<{ sec: number; cpuUs: number; peak: number }> {
  const queues = app.get(QueueService);
  for (let i = 0; i < TASKS; i += 1_000) {
    const ids = Array.from({ length: Math.min(1_000, TASKS - i) }, (_, j) => `t${i + j}`);
    await queues.enqueue(
      queue,
      ids.filter((_, j) => j % 2 === 0),
      { name: 'a' },
    );
    await queues.enqueue(
      queue,
      ids.filter((_, j) => j % 2 === 1),
      { name: named === 'one-name' ? 'a' : 'b' },
    );
  }
  const running = { a: 0, b: 0 };
  let peak = 0;
  const handler = async (task: { name?: string }) => {
    const n = task.name as 'a' | 'b';
    running[n]++;
    peak = Math.max(peak, running[n]);
    await new Promise((r) => setTimeout(r, HOLD_MS));
    running[n]--;
  };
  let done = 0;
  let finished!: () => void;
  const all = new Promise<void>((r) => (finished = r));
  const events = app.get(RedisLockEvents);
  const offs = [
    events.on('task.completed', (e) => {
      if (e.queue === queue && ++done === TASKS) finished();
    }),
    // A task that dies would never complete: the bench stops instead of waiting forever.
    events.on('task.dead', (e) => {
      if (e.queue === queue) throw new Error(`task ${e.id} died: ${String(e.error)}`);
    }),
  ];
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  const workers =
    named === 'two-names'
      ? [
          queues.process(queue, handler, { name: 'a', concurrency: 4 }),
          queues.process(queue, handler, { name: 'b', concurrency: 4 }),
        ]
      : [
          queues.process(queue, handler, {
            concurrency: 8,
            ...(named === 'one-name' && { name: 'a' }),
          }),
        ];
  await all;
  const sec = Number(process.hrtime.bigint() - start) / 1e9;
  const used = process.cpuUsage(cpu);
  for (const off of offs) off();
  await Promise.all(workers.map((w) => w.close()));
  await queues.obliterate(queue, { force: true });
  return { sec, cpuUs: used.user + used.system, peak };
}

async function main(): Promise<void> {
  const server = await startRedisServer();
  const app = await oursApp({
    redis: server.url,
    queue: { keepCompleted: { ageMs: 0, count: 0 } },
  });
  const modes: Mode[] = [
    ['(u) one unnamed handler, concurrency 8', 'unnamed'],
    ["(n1) one named handler 'a', concurrency 8 (every task named 'a')", 'one-name'],
    ["(n2) named 'a' and 'b', concurrency 4 each", 'two-names'],
  ].map(([name, named]) => ({
    name,
    named: named as Shape,
    tasksPerSec: [],
    cpuUsPerTask: [],
    peaks: [],
  }));
  try {
    // Warm-up: scripts loaded, JIT warm.
    for (const m of modes) await drain(app, `warm-${m.named}`, m.named);
    for (let round = 0; round < ROUNDS; round++) {
      for (const mode of round % 2 === 0 ? modes : [...modes].reverse()) {
        const r = await drain(app, `bench-${round}-${mode.named}`, mode.named);
        mode.tasksPerSec.push(TASKS / r.sec);
        mode.cpuUsPerTask.push(r.cpuUs / TASKS);
        mode.peaks.push(r.peak);
      }
    }
    console.log(`${ROUNDS} alternating rounds of ${TASKS} tasks (hold ${HOLD_MS} ms), medians:`);
    for (const m of modes) {
      console.log(
        `  ${m.name}: ${median(m.tasksPerSec).toFixed(0)} tasks/s, ` +
          `${median(m.cpuUsPerTask).toFixed(1)} client CPU µs/task, peak per name ${Math.max(...m.peaks)}`,
      );
    }
    const [u, ...named] = modes;
    for (const n of named) {
      console.log(
        `${n.name.slice(0, 4)} against (u): time per task ${(median(u.tasksPerSec) / median(n.tasksPerSec)).toFixed(3)}x, ` +
          `client CPU per task ${(median(n.cpuUsPerTask) / median(u.cpuUsPerTask)).toFixed(3)}x`,
      );
    }
  } finally {
    await app.close();
    await server.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
