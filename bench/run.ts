/**
 * The benchmark harness: `npm run bench` (full, writes bench/RESULTS.md and bench/results.json)
 * or `npm run bench:quick` (CI smoke test, under a minute, writes to the temp directory).
 * Starts its own redis-server and runs every shape for this library and each peer, alternating,
 * for several rounds; see bench/README.md.
 *
 * Options: `--quick`; `--out <dir>` to write the report elsewhere; `--shapes a,b` and
 * `--libraries c,d` to run only those shapes (ids or families: `parked`, `crowd`, `drain`) and
 * libraries (ids as in results.json); `--only lock|queue` for one half; `--rounds n` to run n
 * rounds instead of the mode's. A filtered run (`--shapes`, `--libraries`, `--only`) writes to
 * the temp directory unless `--out` is given, and never updates README.md.
 */
import 'reflect-metadata';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { startRedisServer } from '../scripts/redis-server';
import type { LockLibrary } from './adapters/lock-adapter';
import { CONTENDED_LIBRARIES, LOCK_LIBRARIES } from './adapters/lock-libraries';
import { SEMAPHORE_LIBRARIES } from './adapters/semaphore-libraries';
import { oursQueueMissing } from './adapters/ours-queue.adapter';
import type { QueueLibrary } from './adapters/queue-adapter';
import {
  CANCEL_LIBRARIES,
  DRAIN_LIBRARIES,
  ENQUEUE_LIBRARIES,
  FLOW_LIBRARIES,
  GROUP_LIBRARIES,
  LIMITED_LIBRARIES,
  WAIT_LIBRARIES,
} from './adapters/queue-libraries';
import { FULL_CONFIG, QUICK_CONFIG, shapeTimeoutMs } from './bench-config';
import { benchShapes, type BenchShapes } from './shapes/bench-shapes';
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
import {
  filterNote,
  parseRunFilter,
  selectedLibraries,
  shapeSelected,
  type RunFilter,
} from './support/run-filter';
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
  filter: RunFilter;
}

/**
 * Runs `shape` for each library the filter selects (rotated by round), flushing the server
 * before each. A run that fails, or does not finish within the shape's `timeoutMs` (default
 * `shapeTimeoutMs`), is recorded as an error and the next begins.
 */
async function runShape<L extends { id: string; label: string }>(
  shape: Shape<L>,
  libraries: readonly L[],
  { ctx, results, tables, admin, filter }: RoundRun,
): Promise<void> {
  if (!shapeSelected(filter, shape.id)) return;
  // The floor's probes are not libraries: a library filter leaves them alone.
  const selected = shape.id === 'floor' ? libraries : selectedLibraries(filter, libraries);
  const columns = tables.find((t) => t.shape === shape.id)?.columns ?? [];
  const timeoutMs = shape.timeoutMs ?? shapeTimeoutMs(ctx.config);
  for (const library of rotate(selected, ctx.round - 1)) {
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

/** Every shape of the run, in run order. */
function allShapes(shapes: BenchShapes): { id: string }[] {
  return [
    shapes.floor,
    ...shapes.lock,
    shapes.flashSale,
    shapes.enqueue,
    ...shapes.drain,
    shapes.groups,
    shapes.rateLimited,
    shapes.waitFor,
    shapes.cancel,
    shapes.flows,
  ];
}

/** The ids of the queue shapes. */
function queueShapeIds(shapes: BenchShapes): string[] {
  return [
    shapes.enqueue,
    ...shapes.drain,
    shapes.groups,
    shapes.rateLimited,
    shapes.waitFor,
    shapes.cancel,
    shapes.flows,
  ].map((s) => s.id);
}

async function main(): Promise<void> {
  const base = process.argv.includes('--quick') ? QUICK_CONFIG : FULL_CONFIG;
  const rounds = option('--rounds');
  if (rounds !== undefined && !/^[1-9]\d*$/.test(rounds)) {
    throw new Error(`--rounds: a positive integer, got '${rounds}'`);
  }
  const config = rounds ? { ...base, rounds: Number(rounds) } : base;
  // `--only queue` (or `lock`): a partial run, reported under $TMPDIR unless --out says where.
  const only = option('--only');
  const runLocks = !only || only === 'lock';
  const runQueues = !only || only === 'queue';
  const shapes = benchShapes(config);
  const filter = parseRunFilter(
    option('--shapes'),
    option('--libraries'),
    allShapes(shapes).map((s) => s.id),
    [
      ...CONTENDED_LIBRARIES,
      ...ENQUEUE_LIBRARIES,
      ...DRAIN_LIBRARIES,
      ...GROUP_LIBRARIES,
      ...LIMITED_LIBRARIES,
      ...WAIT_LIBRARIES,
      ...CANCEL_LIBRARIES,
      ...FLOW_LIBRARIES,
    ].map((l) => l.id),
  );
  // `--shapes` / `--libraries`: a partial run too.
  const filtered = filterNote(filter);
  const lockLibraries = selectedLibraries(filter, LOCK_LIBRARIES);
  const ours = lockLibraries.filter((l) => l.id === 'ours');
  const args = [
    only && `--only ${only}`,
    rounds && `--rounds ${rounds}`,
    filter.shapes && `--shapes ${filter.shapes.join(',')}`,
    filter.libraries && `--libraries ${filter.libraries.join(',')}`,
  ].filter(Boolean);
  const command =
    (config.mode === 'quick' ? 'npm run bench:quick' : 'npm run bench') +
    (args.length ? ` -- ${args.join(' ')}` : '');
  const outDir = resolve(
    option('--out') ??
      (config.mode === 'quick' || only || filtered
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
  if (filtered) skipped.push(filtered);
  try {
    // Only when a selected shape runs in them (`--shapes serial,distinct-keys` needs none).
    const childShapes = [shapes.contended, shapes.handoff, shapes.wake, ...shapes.crowd];
    const needsChildren =
      runLocks && [...childShapes, ...shapes.parked].some((s) => shapeSelected(filter, s.id));
    const machine = await machineInfo(server.url);
    console.log(
      `bench (${config.mode}): redis ${machine.redis} on ${server.url}, ${machine.cpus} CPUs, ` +
        `load ${machine.loadAverage.join(' ')}; starting ` +
        `${needsChildren ? config.contendedProcesses : 'no'} child processes`,
    );
    // Started together: each compiles the library (ts-node), which on 2 cores takes seconds; one
    // after the other, 8 of them were the quick run's longest step.
    if (needsChildren) {
      const started = Array.from({ length: config.contendedProcesses }, (_, i) =>
        BenchChild.start(i),
      );
      const outcomes = await Promise.allSettled(started);
      for (const outcome of outcomes)
        if (outcome.status === 'fulfilled') children.push(outcome.value);
      const failed = outcomes.find((o) => o.status === 'rejected');
      if (failed) throw (failed as PromiseRejectedResult).reason;
    }
    if (needsChildren) {
      await checkSharedClock(children[0]);
      await checkSharedClock(children[1]);
    }
    await warmUp(
      server.url,
      config,
      runLocks ? lockLibraries : [],
      queueMissing || !runQueues ? [] : selectedLibraries(filter, DRAIN_LIBRARIES),
    );
    await admin.flushall();

    // `--only`: the other half's tables are left out (they would be empty).
    const queueShapes = new Set(queueShapeIds(shapes));
    const tables = reportTables(shapes, config, !queueMissing)
      .filter((t) => shapeSelected(filter, t.shape))
      .filter((t) => (queueShapes.has(t.shape) ? runQueues : runLocks))
      .map((t) => (t.shape === 'floor' ? t : { ...t, rows: selectedLibraries(filter, t.rows) }));
    for (let round = 1; round <= config.rounds; round++) {
      console.log(`round ${round}/${config.rounds}`);
      const ctx: ShapeContext = { url: server.url, config, round, children };
      const run: RoundRun = { ctx, results, tables, admin, filter };
      if (runLocks) {
        await runShape<FloorProbe>(shapes.floor, FLOOR_PROBES, run);
        for (const shape of shapes.lock) {
          const rows = shape === shapes.contended ? CONTENDED_LIBRARIES : LOCK_LIBRARIES;
          await runShape<LockLibrary>(shape, rows, run);
        }
        await runShape<LockLibrary>(shapes.semaphore, SEMAPHORE_LIBRARIES, run);
        await runShape<LockLibrary>(shapes.flashSale, ours, run);
      }
      if (!queueMissing && runQueues) {
        await runShape<QueueLibrary>(shapes.enqueue, ENQUEUE_LIBRARIES, run);
        for (const shape of shapes.drain) await runShape<QueueLibrary>(shape, DRAIN_LIBRARIES, run);
        await runShape<QueueLibrary>(shapes.groups, GROUP_LIBRARIES, run);
        await runShape<QueueLibrary>(shapes.rateLimited, LIMITED_LIBRARIES, run);
        await runShape<QueueLibrary>(shapes.waitFor, WAIT_LIBRARIES, run);
        await runShape<QueueLibrary>(shapes.cancel, CANCEL_LIBRARIES, run);
        await runShape<QueueLibrary>(shapes.flows, FLOW_LIBRARIES, run);
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
        lock: CONTENDED_LIBRARIES.map(({ id, label, ours }) => ({ id, label, ours })),
        semaphore: SEMAPHORE_LIBRARIES.map(({ id, label, ours }) => ({ id, label, ours })),
        enqueue: ENQUEUE_LIBRARIES.map(({ id, label, ours }) => ({ id, label, ours })),
        drain: DRAIN_LIBRARIES.map(({ id, label, ours }) => ({ id, label, ours })),
        waitFor: WAIT_LIBRARIES.map(({ id, label, ours }) => ({ id, label, ours })),
        cancel: CANCEL_LIBRARIES.map(({ id, label, ours }) => ({ id, label, ours })),
        floor: FLOOR_PROBES.map(({ id, label }) => ({ id, label })),
      },
      skipped,
      targets,
      summary: results.summaries(),
      derived: results.summaries('derived'),
      records: results.records,
    });
    if (config.mode === 'full' && !option('--out') && !only && !filtered) {
      const updated = await updateReadme(join(ROOT, 'README.md'), report, machine, command);
      if (updated) console.log('README.md: Performance section updated');
    }
    console.log(
      `wrote ${resultsMd} and results.json in ${Math.round((Date.now() - started) / 1000)} s`,
    );
    // No performance thresholds, but a broken shape or an unsafe lock of ours fails the run (the
    // CI smoke test relies on this).
    const broken = results.records.filter((r) => r.error).length;
    const oursSum = (shapeIds: readonly string[], metric: string) =>
      LOCK_LIBRARIES.filter((l) => l.ours).reduce(
        (sum, l) =>
          sum + shapeIds.reduce((s, id) => s + (results.summary(id, l.id, metric)?.sum ?? 0), 0),
        0,
      );
    const sectionShapes = [shapes.contended, ...shapes.crowd].map((s) => s.id);
    const oursOverlaps = oursSum(sectionShapes, 'overlaps');
    const oversold = oursSum([shapes.flashSale.id], 'oversold');
    if (broken > 0 || oursOverlaps > 0 || oversold > 0) {
      console.error(
        `${broken} shape run(s) failed; ${oursOverlaps} overlapping section(s) of ours; ` +
          `${oversold} unit(s) oversold in the flash sale`,
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
