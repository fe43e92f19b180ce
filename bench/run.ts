/**
 * The benchmark harness: `npm run bench` (full, writes bench/RESULTS.md and bench/results.json)
 * or `npm run bench:quick` (CI smoke test, under a minute, writes to the temp directory).
 * Starts its own redis-server and runs every shape for this library and each peer, alternating,
 * for several rounds; see bench/README.md.
 *
 * Options: `--quick`; `--out <dir>` to write the report elsewhere.
 */
import 'reflect-metadata';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { startRedisServer } from '../scripts/redis-server';
import type { LockLibrary } from './adapters/lock-adapter';
import { LOCK_LIBRARIES } from './adapters/lock-libraries';
import { oursQueueMissing } from './adapters/ours-queue.adapter';
import type { QueueLibrary } from './adapters/queue-adapter';
import {
  DRAIN_LIBRARIES,
  ENQUEUE_LIBRARIES,
  GROUP_LIBRARIES,
  LIMITED_LIBRARIES,
} from './adapters/queue-libraries';
import { FULL_CONFIG, QUICK_CONFIG, shapeTimeoutMs } from './bench-config';
import { benchShapes } from './shapes/bench-shapes';
import { checkSharedClock } from './shapes/handoff.shape';
import { FLOOR_PROBES, type FloorProbe } from './shapes/physical-floor.shape';
import type { Shape, ShapeContext } from './shapes/shape';
import { BenchChild } from './support/bench-child';
import { renderReport, type TableSpec } from './support/bench-report';
import { evaluateTargets } from './support/bench-targets';
import { addDerived } from './support/derived-metrics';
import { warmUp } from './support/jit-warm-up';
import { currentLoadAverage, machineInfo } from './support/machine-info';
import { progressLine } from './support/progress-line';
import { updateReadme, writeReportFiles } from './support/report-files';
import { reportTables } from './support/report-tables';
import { installRequestCounter, uncountedClient } from './support/request-counter';
import { RunResults } from './support/run-results';
import { withTimeout } from './support/with-timeout';

const ROOT = resolve(__dirname, '..');

/** `list` rotated left by `by` places: each round starts with another library. */
function rotate<T>(list: readonly T[], by: number): T[] {
  const n = by % list.length;
  return [...list.slice(n), ...list.slice(0, n)];
}

/** What every shape run of a round shares. */
interface RoundRun {
  ctx: ShapeContext;
  results: RunResults;
  tables: readonly TableSpec[];
  admin: Redis;
}

/**
 * Runs `shape` for each library (rotated by round), flushing the server before each. A run that
 * fails, or does not finish within `shapeTimeoutMs`, is recorded as an error and the next begins.
 */
async function runShape<L extends { id: string; label: string }>(
  shape: Shape<L>,
  libraries: readonly L[],
  { ctx, results, tables, admin }: RoundRun,
): Promise<void> {
  const columns = tables.find((t) => t.shape === shape.id)?.columns ?? [];
  const timeoutMs = shapeTimeoutMs(ctx.config);
  for (const library of rotate(libraries, ctx.round - 1)) {
    await admin.flushall();
    const label = `  ${shape.id.padEnd(12)} ${library.label}`;
    try {
      const metrics = await withTimeout(shape.run(library, ctx), timeoutMs, `${shape.id} run`);
      results.add({ shape: shape.id, library: library.id, round: ctx.round, metrics });
      console.log(`${label}: ${progressLine(columns, metrics)}`);
    } catch (err) {
      const error = (err as Error).message;
      results.add({ shape: shape.id, library: library.id, round: ctx.round, error });
      console.log(`${label}: FAILED ${error.split('\n')[0]}`);
    }
  }
}

function option(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const base = process.argv.includes('--quick') ? QUICK_CONFIG : FULL_CONFIG;
  const rounds = option('--rounds');
  const config = rounds ? { ...base, rounds: Number(rounds) } : base;
  // `--only queue` (or `lock`): a partial run, reported under $TMPDIR unless --out says where.
  const only = option('--only');
  const runLocks = !only || only === 'lock';
  const runQueues = !only || only === 'queue';
  const shapes = benchShapes(config);
  const command =
    (config.mode === 'quick' ? 'npm run bench:quick' : 'npm run bench') +
    (only ? ` -- --only ${only}` : '') +
    (rounds ? ` --rounds ${rounds}` : '');
  const outDir = resolve(
    option('--out') ??
      (config.mode === 'quick' || only
        ? join(tmpdir(), 'nestjs-redis-lock-bench-partial')
        : __dirname),
  );
  installRequestCounter();
  const started = Date.now();
  const server = await startRedisServer();
  const admin = uncountedClient(new Redis(server.url));
  const children: BenchChild[] = [];
  const results = new RunResults();
  const skipped: string[] = [];
  const queueMissing = oursQueueMissing();
  if (queueMissing) skipped.push(`queue shapes: ${queueMissing}`);
  try {
    const machine = await machineInfo(server.url);
    console.log(
      `bench (${config.mode}): redis ${machine.redis} on ${server.url}, ${machine.cpus} CPUs, ` +
        `load ${machine.loadAverage.join(' ')}; starting ${config.contendedProcesses} child processes`,
    );
    for (let i = 0; runLocks && i < config.contendedProcesses; i++) {
      children.push(await BenchChild.start(i));
    }
    if (runLocks) {
      await checkSharedClock(children[0]);
      await checkSharedClock(children[1]);
    }
    await warmUp(server.url, config, !queueMissing);
    await admin.flushall();

    const tables = reportTables(shapes, !queueMissing);
    for (let round = 1; round <= config.rounds; round++) {
      console.log(`round ${round}/${config.rounds}`);
      const ctx: ShapeContext = { url: server.url, config, round, children };
      const run: RoundRun = { ctx, results, tables, admin };
      if (runLocks) {
        await runShape<FloorProbe>(shapes.floor, FLOOR_PROBES, run);
        for (const shape of shapes.lock) await runShape<LockLibrary>(shape, LOCK_LIBRARIES, run);
      }
      if (!queueMissing && runQueues) {
        await runShape<QueueLibrary>(shapes.enqueue, ENQUEUE_LIBRARIES, run);
        for (const shape of shapes.drain) await runShape<QueueLibrary>(shape, DRAIN_LIBRARIES, run);
        await runShape<QueueLibrary>(shapes.groups, GROUP_LIBRARIES, run);
        await runShape<QueueLibrary>(shapes.rateLimited, LIMITED_LIBRARIES, run);
      }
      addDerived(results, round);
      machine.loadAfterRounds.push(currentLoadAverage());
      console.log(
        `  load average after round ${round}: ${machine.loadAfterRounds.at(-1)!.join(' ')}`,
      );
    }

    const bullmq = DRAIN_LIBRARIES.find((l) => l.id === 'bullmq')!;
    const targets = evaluateTargets(results, shapes, bullmq);
    const report = renderReport({
      results,
      tables,
      targets,
      machine,
      config,
      command,
      skipped,
    });
    console.log(`\n${report}`);
    const resultsMd = await writeReportFiles(outDir, report, {
      command,
      machine,
      config,
      libraries: {
        lock: LOCK_LIBRARIES.map(({ id, label, ours }) => ({ id, label, ours })),
        enqueue: ENQUEUE_LIBRARIES.map(({ id, label, ours }) => ({ id, label, ours })),
        drain: DRAIN_LIBRARIES.map(({ id, label, ours }) => ({ id, label, ours })),
        floor: FLOOR_PROBES.map(({ id, label }) => ({ id, label })),
      },
      skipped,
      targets,
      summary: results.summaries(),
      derived: results.summaries('derived'),
      records: results.records,
    });
    if (config.mode === 'full' && !option('--out') && !only) {
      const updated = await updateReadme(join(ROOT, 'README.md'), report, machine, command);
      if (updated) console.log('README.md: Performance section updated');
    }
    console.log(
      `wrote ${resultsMd} and results.json in ${Math.round((Date.now() - started) / 1000)} s`,
    );
    // No performance thresholds, but a broken shape or an unsafe lock of ours fails the run (the
    // CI smoke test relies on this).
    const broken = results.records.filter((r) => r.error).length;
    const oursOverlaps = LOCK_LIBRARIES.filter((l) => l.ours).reduce(
      (sum, l) => sum + (results.summary(shapes.contended.id, l.id, 'overlaps')?.sum ?? 0),
      0,
    );
    if (broken > 0 || oursOverlaps > 0) {
      console.error(
        `${broken} shape run(s) failed; ${oursOverlaps} overlapping section(s) of ours`,
      );
      process.exitCode = 1;
    }
  } finally {
    await Promise.allSettled(children.map((c) => c.stop()));
    await admin.quit().catch(() => undefined);
    await server.stop();
  }
}

main().then(
  // A shape that timed out may still hold connections: exit instead of waiting for them.
  () => process.exit(),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
