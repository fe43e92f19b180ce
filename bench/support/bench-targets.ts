import { LOCK_LIBRARIES } from '../adapters/lock-libraries';
import type { BenchShapes } from '../shapes/bench-shapes';
import { drainShapeId } from '../shapes/queue.shape';
import type { RunResults } from './run-results';

/** How one target of issue 6 stands in a run (medians over rounds). */
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

/** `ours ≤ best / divisor` (lower is better). */
function atMostFraction(
  results: RunResults,
  target: string,
  shape: string,
  metric: string,
  divisor: number,
  unit: string,
  digits: number,
): TargetResult {
  const ours = results.median(shape, OURS, metric);
  const best = bestPeer(results, shape, metric, 'lower');
  if (!Number.isFinite(ours) || !best) return { target, measured: '—', status: 'not measured' };
  return {
    target,
    measured:
      `${f(ours, digits)} ${unit} vs best peer ${f(best.value, digits)} ${unit} ` +
      `(${best.label}): ${f(best.value / ours, 1)}× lower`,
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
 * Evaluates the targets of issue 6 on the medians of a run. They are benchmark targets, not
 * assertions: the run reports them and never fails on them.
 */
export function evaluateTargets(
  results: RunResults,
  shapes: BenchShapes,
  bullmq: { id: string; label: string },
): TargetResult[] {
  const handoff = shapes.handoff.id;
  const contended = shapes.contended.id;
  const targets: TargetResult[] = [];
  const p50 = results.median(handoff, OURS, 'p50Ms');
  targets.push(
    atMostFraction(results, `${handoff} p50 ≤ ⅓ of best peer`, handoff, 'p50Ms', 3, 'ms', 3),
    {
      target: `${handoff} p50 ≤ 0.5 ms`,
      measured: Number.isFinite(p50) ? `${f(p50, 3)} ms` : '—',
      status: !Number.isFinite(p50) ? 'not measured' : p50 <= 0.5 ? 'met' : 'missed',
    },
    atMostFraction(results, `${handoff} p99 ≤ ⅓ of best peer`, handoff, 'p99Ms', 3, 'ms', 3),
  );
  const jain = results.median(contended, OURS, 'jain');
  const overlaps = results.summary(contended, OURS, 'overlaps');
  targets.push(
    {
      target: `${contended}: Jain index ≥ 0.99`,
      measured: Number.isFinite(jain) ? f(jain, 4) : '—',
      status: !Number.isFinite(jain) ? 'not measured' : jain >= 0.99 ? 'met' : 'missed',
    },
    atMostFraction(
      results,
      `${contended}: max wait ≤ ⅕ of best peer`,
      contended,
      'waitMaxMs',
      5,
      'ms',
      1,
    ),
    atLeastFactor(
      results,
      `${contended}: handoffs/s ≥ best peer`,
      contended,
      'handoffsPerSec',
      1,
      'handoffs/s',
    ),
    {
      target: `${contended}: no overlapping sections (ours, every round)`,
      measured: overlaps ? `${overlaps.sum}` : '—',
      status: !overlaps ? 'not measured' : overlaps.sum === 0 ? 'met' : 'missed',
    },
    atLeastFactor(
      results,
      `${shapes.serial.id} ≥ 1.3× best peer`,
      shapes.serial.id,
      'pairsPerSec',
      1.3,
      'pairs/s',
    ),
    atLeastFactor(
      results,
      `${shapes.parallel.id} ≥ 1.3× best peer`,
      shapes.parallel.id,
      'pairsPerSec',
      1.3,
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
  );
  return targets;
}
