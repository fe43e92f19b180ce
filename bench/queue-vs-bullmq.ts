/**
 * The queue against BullMQ outside run.ts, measured as issue 35 asks: both libraries at their
 * defaults (ours: results kept, events on; BullMQ: completed jobs kept, events on), every run on
 * a redis-server of its own started for it, the two taking turns (the order flips each round).
 * Per round: enqueue (50 concurrent producers, one job per call, as run.ts's enqueue shape) and a
 * drain per `--concurrency` (the jobs added untimed, then timed from starting the consumer to the
 * last job handled; stopping it comes after, as run.ts's drain shape). Prints jobs/s and CPU µs
 * per job (this process + the server, `process.cpuUsage()` and `INFO cpu`) of every run, then
 * per measure the medians, the ratio of the medians and the ratio of each round (ours ÷ BullMQ
 * for jobs/s, BullMQ ÷ ours for CPU). Both run in this Node process: JIT-warm after round 1.
 *
 * `--callgrind`: each run's redis-server runs under valgrind's callgrind instead, and what is
 * printed is the server's user-space instructions per job (from the first job handled to the
 * last; the fill before a drain left out). Counts the machine's load does not move: the drains of
 * both libraries are bound by Redis's one core, so their ratio is the ratio of their throughput
 * on an idle machine (bench/README.md). About 30× slower: use `--jobs 5000 --rounds 1`.
 *
 *   node -r ts-node/register/transpile-only bench/queue-vs-bullmq.ts [--jobs 20000] [--rounds 6]
 *     [--concurrency 10,50] [--callgrind]
 */
import 'reflect-metadata';
import type { QueueAdapter, QueueLibrary } from './adapters/queue-adapter';
import { queueLibrary } from './adapters/queue-libraries';
import { startRedisServer } from '../scripts/redis-server';
import { median } from './support/bench-stats';
import { callgrindServer } from './support/callgrind-server';
import { CpuMeter } from './support/cpu-meter';
import { numberArg } from './support/script-args';

const JOBS = numberArg('jobs', 20_000);
const ROUNDS = numberArg('rounds', 6);
const PRODUCERS = 50;
const concurrencyArg = process.argv.indexOf('--concurrency');
const CONCURRENCIES = (concurrencyArg > 0 ? process.argv[concurrencyArg + 1] : '10,50')
  .split(',')
  .map(Number);

const CALLGRIND = process.argv.includes('--callgrind');

const LIBRARIES: readonly QueueLibrary[] = [queueLibrary('ours-leased'), queueLibrary('bullmq')];

interface Run {
  jobsPerSec: number;
  cpuUsPerJob: number;
}

/**
 * Runs `work` (handling `JOBS` jobs) on `library` set up on a new redis-server; measures it:
 * jobs/s and CPU µs per job, or with `--callgrind` the server's instructions per job in the place
 * of the CPU (no rate: valgrind sets the pace).
 */
async function measure(
  library: QueueLibrary,
  prepare: (adapter: QueueAdapter) => Promise<void>,
  work: (adapter: QueueAdapter) => Promise<(() => Promise<void>) | void>,
): Promise<Run> {
  const counter = CALLGRIND ? await callgrindServer() : undefined;
  const server = counter ?? (await startRedisServer());
  try {
    const adapter = await library.create(server.url);
    try {
      await prepare(adapter);
      counter?.zero();
      const meter = counter ? undefined : await CpuMeter.start(server.url);
      const started = performance.now();
      const stop = await work(adapter);
      const ms = performance.now() - started;
      const spent = counter ? counter.instructions() : await meter!.stop();
      if (stop) await stop();
      if (typeof spent === 'number') return { jobsPerSec: NaN, cpuUsPerJob: spent / JOBS };
      return {
        jobsPerSec: (JOBS / ms) * 1000,
        cpuUsPerJob: (spent.clientUs + spent.redisUs) / JOBS,
      };
    } finally {
      await adapter.close();
    }
  } finally {
    await server.stop();
  }
}

const enqueue = (library: QueueLibrary) =>
  measure(
    library,
    (adapter) => adapter.enqueue('warm-up', 'warm-up', { n: -1 }),
    async (adapter) => {
      let next = 0;
      const producer = async () => {
        while (next < JOBS) {
          const n = next++;
          await adapter.enqueue('enqueue', `job-${n}`, { n });
        }
      };
      await Promise.all(Array.from({ length: PRODUCERS }, producer));
    },
  );

const drain = (library: QueueLibrary, concurrency: number) =>
  measure(
    library,
    (adapter) => adapter.fill('drain', JOBS),
    (adapter) => adapter.drain('drain', JOBS, concurrency),
  );

async function main(): Promise<void> {
  const measures = ['enqueue', ...CONCURRENCIES.map((c) => `drain-${c}`)];
  const runs = new Map<string, Run[]>();
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? LIBRARIES : [...LIBRARIES].reverse();
    for (const m of measures) {
      for (const library of order) {
        const run =
          m === 'enqueue' ? await enqueue(library) : await drain(library, Number(m.slice(6)));
        const key = `${m} ${library.id}`;
        runs.set(key, [...(runs.get(key) ?? []), run]);
        console.log(
          CALLGRIND
            ? `round ${round + 1} ${key}: ${Math.round(run.cpuUsPerJob)} Redis instructions/job`
            : `round ${round + 1} ${key}: ${Math.round(run.jobsPerSec)} jobs/s, ` +
                `${run.cpuUsPerJob.toFixed(1)} µs CPU/job`,
        );
      }
    }
  }
  const [ours, bullmq] = LIBRARIES.map((l) => l.id);
  console.log(
    `\n${JOBS} jobs per run, ${ROUNDS} rounds, each run on a new redis-server` +
      (CALLGRIND ? ' under callgrind' : ''),
  );
  for (const m of measures) {
    const a = runs.get(`${m} ${ours}`)!;
    const b = runs.get(`${m} ${bullmq}`)!;
    const rate = (r: Run[]) => median(r.map((x) => x.jobsPerSec));
    const cpu = (r: Run[]) => median(r.map((x) => x.cpuUsPerJob));
    if (CALLGRIND) {
      console.log(
        `${m}: Redis instructions/job ${Math.round(cpu(a))} vs ${Math.round(cpu(b))} = ` +
          `${(cpu(b) / cpu(a)).toFixed(2)}× less`,
      );
      continue;
    }
    const perRound = a.map((x, i) => (x.jobsPerSec / b[i].jobsPerSec).toFixed(2)).join(', ');
    console.log(
      `${m}: jobs/s ${Math.round(rate(a))} vs ${Math.round(rate(b))} = ` +
        `${(rate(a) / rate(b)).toFixed(2)}× (rounds: ${perRound}); CPU µs/job ` +
        `${cpu(a).toFixed(1)} vs ${cpu(b).toFixed(1)} = ${(cpu(b) / cpu(a)).toFixed(2)}× less`,
    );
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
