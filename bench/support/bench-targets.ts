import { FAIR_FLOOR } from '../adapters/fair-floor.adapter';
import { LOCK_LIBRARIES } from '../adapters/lock-libraries';
import type { BenchShapes } from '../shapes/bench-shapes';
import { crowdShapeId } from '../shapes/crowd.shape';
import { parkedShapeId } from '../shapes/parked.shape';
import { drainShapeId } from '../shapes/queue.shape';
import { PARKED_WAITS } from '../shapes/queue-remote.shape';
import type { MetricSource, RunResults } from './run-results';

/** How one target of issues 6, 12 and 26 stands in a run (medians over rounds). */
export interface TargetResult {
  target: string;
  measured: string;
  status: 'met' | 'missed' | 'not measured';
}

interface Best {
  label: string;
  value: number;
}

const OURS = 'ours';
const PEERS = LOCK_LIBRARIES.filter((l) => !l.ours);

function bestPeer(
  results: RunResults,
  shape: string,
  metric: string,
  better: 'higher' | 'lower',
): Best | undefined {
  let best: Best | undefined;
  for (const peer of PEERS) {
    const value = results.median(shape, peer.id, metric);
    if (!Number.isFinite(value)) continue;
    if (!best || (better === 'higher' ? value > best.value : value < best.value)) {
      best = { label: peer.label, value };
    }
  }
  return best;
}

const f = (n: number, digits: number) => n.toFixed(digits);

const NOT_MEASURED = (target: string): TargetResult => ({
  target,
  measured: '—',
  status: 'not measured',
});

/**
 * `value ≤ limit` (`'max'`) or `value ≥ limit` (`'min'`), shown as `value` with `digits` and
 * `unit`; not measured when `value` is not a number.
 */
function bound(
  target: string,
  value: number,
  kind: 'max' | 'min',
  limit: number,
  digits: number,
  unit = '',
): TargetResult {
  if (!Number.isFinite(value)) return NOT_MEASURED(target);
  return {
    target,
    measured: `${f(value, digits)}${unit ? ` ${unit}` : ''}`,
    status: (kind === 'max' ? value <= limit : value >= limit) ? 'met' : 'missed',
  };
}

/** The median of one metric of ours, measured or derived; `NaN` when unmeasured. */
function oursMedian(
  results: RunResults,
  shape: string,
  metric: string,
  from: MetricSource = 'metrics',
): number {
  return results.summary(shape, OURS, metric, from)?.median ?? NaN;
}

/** No `metric` (a count) of ours in any round of `shape`. */
function noneOf(results: RunResults, target: string, shape: string, metric: string): TargetResult {
  const s = results.summary(shape, OURS, metric);
  if (!s) return NOT_MEASURED(target);
  return { target, measured: `${s.sum}`, status: s.sum === 0 ? 'met' : 'missed' };
}

/** `ours ≤ best / divisor` (lower is better; a divisor below 1 allows more than the best). */
function atMostFraction(
  results: RunResults,
  target: string,
  shape: string,
  metric: string,
  divisor: number,
  unit: string,
  digits: number,
  reference?: { id: string; name: string },
): TargetResult {
  const ours = results.median(shape, OURS, metric);
  const best = bestPeer(results, shape, metric, 'lower');
  if (!Number.isFinite(ours) || !best) return { target, measured: '—', status: 'not measured' };
  const times = (a: number, b: number) =>
    a <= b ? `${f(b / a, 1)}× lower` : `${f(a / b, 2)}× higher`;
  // A reference row (not a peer) measured beside them: where it stands against the best peer.
  const shown = reference && results.median(shape, reference.id, metric);
  return {
    target,
    measured:
      `${f(ours, digits)} ${unit} vs best peer ${f(best.value, digits)} ${unit} ` +
      `(${best.label}): ${times(ours, best.value)}` +
      (shown && Number.isFinite(shown)
        ? `; ${reference.name} ${f(shown, digits)} ${unit}, ${times(shown, best.value)}`
        : ''),
    status: ours <= best.value / divisor ? 'met' : 'missed',
  };
}

/** `ours ≥ factor × best` (higher is better). */
function atLeastFactor(
  results: RunResults,
  target: string,
  shape: string,
  metric: string,
  factor: number,
  unit: string,
  ours = OURS,
  peer?: { id: string; label: string },
): TargetResult {
  const value = results.median(shape, ours, metric);
  const best = peer
    ? { label: peer.label, value: results.median(shape, peer.id, metric) }
    : bestPeer(results, shape, metric, 'higher');
  if (!Number.isFinite(value) || !best || !Number.isFinite(best.value)) {
    return { target, measured: '—', status: 'not measured' };
  }
  return {
    target,
    measured: `${f(value, 0)} vs ${f(best.value, 0)} ${unit} (${best.label}): ${f(value / best.value, 2)}×`,
    status: value >= factor * best.value ? 'met' : 'missed',
  };
}

/**
 * The targets of a shape of sections on one key (contended, crowd): Jain over processes ≥ 0.99,
 * max wait ≤ ⅕ of the best peer's, handoffs/s ≥ `factor` × the best peer's, no overlap.
 */
function sectionTargets(
  results: RunResults,
  shape: string,
  factor: number,
  jain: string,
): TargetResult[] {
  const times = factor === 1 ? '' : `${factor}× `;
  return [
    bound(`${shape}: ${jain} ≥ 0.99`, oursMedian(results, shape, 'jain'), 'min', 0.99, 4),
    atMostFraction(results, `${shape}: max wait ≤ ⅕ of best peer`, shape, 'waitMaxMs', 5, 'ms', 1),
    atLeastFactor(
      results,
      `${shape}: handoffs/s ≥ ${times}best peer`,
      shape,
      'handoffsPerSec',
      factor,
      'handoffs/s',
    ),
    noneOf(results, `${shape}: no overlapping sections (ours, every round)`, shape, 'overlaps'),
  ];
}

/**
 * `target` with the contended shapes' ceiling appended: handoffs/s of their section loop with no
 * lock at all (the floor's `section-ceiling` probe), which no lock can exceed.
 */
function withCeiling(results: RunResults, target: TargetResult, floor: string): TargetResult {
  const ceiling = results.median(floor, 'section-ceiling', 'sectionsPerSec');
  if (!Number.isFinite(ceiling) || target.status === 'not measured') return target;
  return { ...target, measured: `${target.measured}; ceiling (no lock) ${f(ceiling, 0)}/s` };
}

/**
 * `target` with the serial shape's ceilings appended: pairs/s of a bare `SET NX PX` + `DEL` loop
 * (the floor's `serial-ceiling` probe), which no lock with an awaited acquire and release can
 * exceed, and of the two minimal scripts of a fenced lock (`fenced-ceiling`), which no lock that
 * hands out fences can exceed.
 */
function withSerialCeiling(results: RunResults, target: TargetResult, floor: string): TargetResult {
  if (target.status === 'not measured') return target;
  const ceilings = [
    ['serial-ceiling', 'SET NX PX + DEL, no lock logic'],
    ['fenced-ceiling', 'fenced lock: 2 minimal scripts'],
  ]
    .map(([probe, what]) => [what, results.median(floor, probe, 'pairsPerSec')] as const)
    .filter(([, pairs]) => Number.isFinite(pairs))
    .map(([what, pairs]) => `ceiling (${what}) ${f(pairs, 0)} pairs/s`);
  if (ceilings.length === 0) return target;
  return { ...target, measured: [target.measured, ...ceilings].join('; ') };
}

/**
 * A parked shape's line drains completely in every round: nobody gave up or was left waiting at
 * the cut-off (a median would hide one round that stalled).
 */
function drainTarget(results: RunResults, shape: string): TargetResult {
  const target = `${shape}: the line drains completely`;
  const rounds = results.records.filter((r) => r.shape === shape && r.library === OURS);
  if (rounds.length === 0) return NOT_MEASURED(target);
  const drained = rounds.filter(
    (r) => r.metrics?.drainMs !== undefined && r.metrics.gaveUp === 0 && r.metrics.unfinished === 0,
  );
  const drain = oursMedian(results, shape, 'drainMs');
  return {
    target,
    measured:
      `${drained.length} of ${rounds.length} round(s) drained` +
      (Number.isFinite(drain) ? ` (median ${f(drain, 0)} ms)` : ''),
    status: drained.length === rounds.length ? 'met' : 'missed',
  };
}

/**
 * The cost targets of `shape` (issue 12): at most 50 Redis commands/s and 5 % of Redis's CPU
 * while parked.
 */
function parkedCostTargets(results: RunResults, shape: string): TargetResult[] {
  return [
    bound(
      `${shape}: ≤ 50 Redis commands/s while parked`,
      oursMedian(results, shape, 'commandsPerSec'),
      'max',
      50,
      1,
      'commands/s',
    ),
    bound(
      `${shape}: ≤ 5 % Redis CPU while parked`,
      oursMedian(results, shape, 'redisCpuPct'),
      'max',
      5,
      2,
      '%',
    ),
  ];
}

/**
 * The flash-sale targets (issue 12): sell rate ≥ 0.5 × the HTTP ceiling, no 423 answer in a sale
 * that sold out (every round must sell out), buy p99 ≤ 1 s, nothing oversold; with the orders
 * in PostgreSQL (issue 27): buy → order row p99 ≤ 1 s, no unit sold without its row.
 */
function flashSaleTargets(results: RunResults, shape: string): TargetResult[] {
  const measured = results.records.filter(
    (r) => r.shape === shape && r.library === OURS && r.metrics,
  );
  const soldOut = measured.filter((r) => r.metrics!.soldOut === 1);
  const locked = measured.reduce((sum, r) => sum + r.metrics!.locked, 0);
  const lockedTarget = `${shape}: 0 answers 423 in a sale that sold out`;
  return [
    bound(
      `${shape}: sell rate ≥ 0.5× HTTP ceiling`,
      oursMedian(results, shape, 'sellToCeiling', 'derived'),
      'min',
      0.5,
      2,
      '×',
    ),
    measured.length === 0
      ? NOT_MEASURED(lockedTarget)
      : {
          target: lockedTarget,
          measured: `${locked} × 423 over ${measured.length} sale(s), ${soldOut.length} sold out`,
          status: locked === 0 && soldOut.length === measured.length ? 'met' : 'missed',
        },
    bound(`${shape}: buy p99 ≤ 1 s`, oursMedian(results, shape, 'buyP99Ms'), 'max', 1_000, 0, 'ms'),
    noneOf(results, `${shape}: 0 oversold (every round)`, shape, 'oversold'),
    bound(
      `${shape}: buy → order row p99 ≤ 1 s (PostgreSQL)`,
      oursMedian(results, shape, 'rowP99Ms'),
      'max',
      1_000,
      0,
      'ms',
    ),
    noneOf(results, `${shape}: 0 lost (every round: each unit sold has its row)`, shape, 'lost'),
  ];
}

/** `ours ≤ peer / divisor` for one named peer (lower is better), on row `ours`. */
function atMostFractionOf(
  results: RunResults,
  target: string,
  shape: string,
  metric: string,
  divisor: number,
  ours: string,
  peer: { id: string; label: string },
): TargetResult {
  const value = results.median(shape, ours, metric);
  const theirs = results.median(shape, peer.id, metric);
  if (!Number.isFinite(value) || !Number.isFinite(theirs)) return NOT_MEASURED(target);
  return {
    target,
    measured:
      `${f(value, 2)} ms vs ${f(theirs, 2)} ms (${peer.label}): ` +
      `${f(value / theirs, 2)}× of it`,
    status: value <= theirs / divisor ? 'met' : 'missed',
  };
}

/** `target` with the pub/sub floor p99 measured next to it appended (the cancel shape). */
function withFloor(target: TargetResult, floorP99Ms: number): TargetResult {
  if (target.status === 'not measured' || !Number.isFinite(floorP99Ms)) return target;
  return { ...target, measured: `${target.measured}; pub/sub floor p99 ${f(floorP99Ms, 2)} ms` };
}

/**
 * The targets of issue 26 on the remote queue shapes: completion seen on another instance p50
 * and p99 ≤ ½ of BullMQ's; parked waits with the workers stopped ≤ 5 Redis commands/s; cancel → signal aborted on another process p99 ≤ 50 ms, one at a
 * time and in bursts, every signal aborted and nothing left leased.
 */
function remoteQueueTargets(
  results: RunResults,
  shapes: BenchShapes,
  bullmq: { id: string; label: string },
): TargetResult[] {
  const waitFor = shapes.waitFor.id;
  const cancel = shapes.cancel.id;
  const ours = 'ours-leased';
  const median = (metric: string) => results.summary(cancel, ours, metric)?.median ?? NaN;
  const sum = (metric: string) => results.summary(cancel, ours, metric)?.sum;
  const lost = ['notSignalled', 'notAborted', 'leftLeased', 'notCancelled'].map(sum);
  const cleanTarget = `${cancel}: every signal aborted, none retried, none left leased`;
  return [
    ...(['p50Ms', 'p99Ms'] as const).map((metric) =>
      atMostFractionOf(
        results,
        `queue: completion seen on another instance ${metric.slice(0, 3)} ≤ ½ of BullMQ`,
        waitFor,
        metric,
        2,
        ours,
        bullmq,
      ),
    ),
    bound(
      `queue: ${PARKED_WAITS.toLocaleString('en-US')} parked waitFor, workers stopped: ≤ 5 Redis commands/s`,
      results.summary(waitFor, ours, 'parkedCommandsPerSec')?.median ?? NaN,
      'max',
      5,
      1,
      'commands/s',
    ),
    withFloor(
      bound(`${cancel}: p99 ≤ 50 ms (one at a time)`, median('p99Ms'), 'max', 50, 2, 'ms'),
      median('floorP99Ms'),
    ),
    withFloor(
      bound(`${cancel}: p99 ≤ 50 ms (in bursts)`, median('burstP99Ms'), 'max', 50, 2, 'ms'),
      median('floorBurstP99Ms'),
    ),
    lost.some((n) => n === undefined)
      ? NOT_MEASURED(cleanTarget)
      : {
          target: cleanTarget,
          measured:
            `${lost[0]} answer(s) not 'signalled', ${lost[1]} signal(s) not aborted, ` +
            `${lost[2]} left leased, ${lost[3]} not ended cancelled`,
          status: lost.every((n) => n === 0) ? 'met' : 'missed',
        },
  ];
}

/**
 * The cost targets of issue 35: Redis CPU per uncontended pair (serial) ≤ the best peer's, per
 * contended section ≤ 2× the best peer's, and what the distinct-keys shape's keys leave in Redis
 * (ours, all keys together) ≤ 256 KB.
 */
function redisCostTargets(results: RunResults, shapes: BenchShapes): TargetResult[] {
  const distinct = shapes.distinctKeys;
  const keys = distinct.keys;
  return [
    atMostFraction(
      results,
      `${shapes.serial.id}: Redis CPU per pair ≤ best peer's (fenced)`,
      shapes.serial.id,
      'redisCpuUsPerPair',
      1,
      'µs',
      1,
    ),
    atMostFraction(
      results,
      `${shapes.contended.id}: Redis CPU per section ≤ 2× best peer's`,
      shapes.contended.id,
      'redisCpuUsPerSection',
      0.5,
      'µs',
      1,
      { id: FAIR_FLOOR.id, name: 'the fair floor' },
    ),
    bound(
      `${distinct.id}: ${keys.toLocaleString('en-US')} keys leave ≤ 256 KB in Redis`,
      (oursMedian(results, distinct.id, 'bytesLeftPerKey') * keys) / 1024,
      'max',
      256,
      1,
      'KB',
    ),
  ];
}

/**
 * Evaluates the targets of issues 6, 12, 26 and 35 on the medians of a run. They are benchmark targets,
 * not assertions: the run reports them and never fails on them.
 */
export function evaluateTargets(
  results: RunResults,
  shapes: BenchShapes,
  bullmq: { id: string; label: string },
): TargetResult[] {
  const handoff = shapes.handoff.id;
  const contended = shapes.contended.id;
  const targets: TargetResult[] = [
    atMostFraction(results, `${handoff} p50 ≤ ⅓ of best peer`, handoff, 'p50Ms', 3, 'ms', 3),
    bound(`${handoff} p50 ≤ 0.5 ms`, oursMedian(results, handoff, 'p50Ms'), 'max', 0.5, 3, 'ms'),
    bound(
      `${handoff} p50 ≤ pub/sub floor + 0.15 ms`,
      oursMedian(results, handoff, 'overPubSubMs', 'derived'),
      'max',
      0.15,
      3,
      'ms above the floor',
    ),
    atMostFraction(results, `${handoff} p99 ≤ ⅓ of best peer`, handoff, 'p99Ms', 3, 'ms', 3),
    ...sectionTargets(results, contended, 1, 'Jain index'),
    ...redisCostTargets(results, shapes),
    withCeiling(
      results,
      atLeastFactor(
        results,
        `${contended} fair: false: handoffs/s ≥ 1.1× best peer`,
        contended,
        'handoffsPerSec',
        1.1,
        'handoffs/s',
        'ours-unfair',
      ),
      shapes.floor.id,
    ),
  ];
  const crowd = shapes.crowd.find((s) => s.id === crowdShapeId(8, 16))?.id;
  if (crowd) {
    targets.push(
      ...sectionTargets(results, crowd, 2, 'Jain over processes').map((t) =>
        t.target.includes('handoffs/s') ? withCeiling(results, t, shapes.floor.id) : t,
      ),
    );
  }
  const parked = shapes.parked.find((s) => s.id === parkedShapeId(10_000))?.id;
  if (parked) targets.push(...parkedCostTargets(results, parked));
  // Every parked shape must drain in every round, not only the one the cost targets are for.
  targets.push(...shapes.parked.map((s) => drainTarget(results, s.id)));
  targets.push(
    ...flashSaleTargets(results, shapes.flashSale.id),
    withSerialCeiling(
      results,
      atLeastFactor(
        results,
        `${shapes.serial.id} ≥ 1.05× best peer`,
        shapes.serial.id,
        'pairsPerSec',
        1.05,
        'pairs/s',
      ),
      shapes.floor.id,
    ),
    atLeastFactor(
      results,
      `${shapes.parallel.id} ≥ 1.05× best peer`,
      shapes.parallel.id,
      'pairsPerSec',
      1.05,
      'pairs/s',
    ),
    atLeastFactor(
      results,
      'queue: enqueue ≥ 1.5× BullMQ add',
      shapes.enqueue.id,
      'jobsPerSec',
      1.5,
      'jobs/s',
      'ours',
      bullmq,
    ),
    atLeastFactor(
      results,
      'queue: enqueue with maxSize set ≥ 0.95× enqueue without it',
      shapes.enqueue.id,
      'jobsPerSec',
      0.95,
      'jobs/s',
      'ours-bounded',
      { id: 'ours', label: 'nestjs-redis-lock (no maxSize)' },
    ),
    ...[10, 50].map((concurrency) =>
      atLeastFactor(
        results,
        `queue: leased drain at concurrency ${concurrency} ≥ 1.5× BullMQ`,
        drainShapeId(concurrency),
        'jobsPerSec',
        1.5,
        'jobs/s',
        'ours-leased',
        bullmq,
      ),
    ),
    ...remoteQueueTargets(results, shapes, bullmq),
    atLeastFactor(
      results,
      'queue: flows (1,000 × 10 children, enqueue → parent done) ≥ 1.5× BullMQ FlowProducer',
      shapes.flows.id,
      'flowsPerSec',
      1.5,
      'flows/s',
      'ours-leased',
      bullmq,
    ),
    atLeastFactor(
      results,
      'queue: batch drain (size 100, concurrency 1) ≥ 5× single-task drain at concurrency 1',
      drainShapeId(1),
      'jobsPerSec',
      5,
      'jobs/s',
      'ours-batch',
      { id: 'ours-leased', label: 'nestjs-redis-lock, leased (one task per call)' },
    ),
  );
  return targets;
}
