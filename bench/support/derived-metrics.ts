import type { Metrics } from '../shapes/shape';
import type { RunResults } from './run-results';

/**
 * What the report derives from one record's measured `metrics`; `undefined` when nothing:
 * - serial: `roundTrips`, the time of one pair (1 / pairs per second) in ioredis round trips
 *   measured by the same shape right before its window (`roundTripMs`);
 * - handoff: `roundTrips`, its p50 in the round trips measured right before its window, and
 *   `overPubSubMs`, its p50 above `pubSubFloorP50Ms` (the round's pub/sub floor probe: a wake-up
 *   between two processes without any lock logic);
 * - wake: `overFloorMs` and `overFloorP90Ms`, its p50 and p90 above the pub/sub floor that the
 *   shape measured itself, interleaved with the handoffs (`floorP50Ms`, `floorP90Ms`);
 * - flash-sale: `sellToCeiling`, units sold per second at the hot key over the GETs per second
 *   the same instances served with the same connections.
 */
export function derivedMetrics(
  shape: string,
  metrics: Metrics,
  pubSubFloorP50Ms?: number,
): Metrics | undefined {
  const { roundTripMs } = metrics;
  if (shape === 'serial' && roundTripMs) {
    return { roundTrips: 1000 / metrics.pairsPerSec / roundTripMs };
  }
  if (shape === 'flash-sale' && metrics.ceilingPerSec) {
    return { sellToCeiling: metrics.sellPerSec / metrics.ceilingPerSec };
  }
  if (shape === 'wake' && metrics.floorP50Ms !== undefined) {
    return {
      overFloorMs: metrics.p50Ms - metrics.floorP50Ms,
      overFloorP90Ms: metrics.p90Ms - metrics.floorP90Ms,
    };
  }
  if (shape === 'handoff') {
    const derived: Metrics = {};
    if (roundTripMs) derived.roundTrips = metrics.p50Ms / roundTripMs;
    if (pubSubFloorP50Ms !== undefined) derived.overPubSubMs = metrics.p50Ms - pubSubFloorP50Ms;
    return derived;
  }
  return undefined;
}

/** Sets `derived` on every measured record of `round` that has derived values (see above). */
export function addDerived(results: RunResults, round: number): void {
  const pubSubFloor = results.metricsOf('floor', 'pubsub', round)?.p50Ms;
  for (const record of results.records) {
    if (record.round !== round || !record.metrics) continue;
    const derived = derivedMetrics(record.shape, record.metrics, pubSubFloor);
    if (derived) record.derived = derived;
  }
}
