import { LOCK_LIBRARIES } from '../adapters/lock-libraries';
import type { RunResults } from './run-results';

/**
 * Adds, to the serial and handoff metrics of `round`, their time in round trips of the same
 * round's floor, and the handoff's p50 above the pub/sub floor.
 */
export function addRoundTrips(results: RunResults, round: number): void {
  const floor = (probe: string) => results.metricsOf('floor', probe, round)?.requestsPerSec;
  const rtt = { benchmark: floor('redis-benchmark'), ioredis: floor('ioredis') };
  const pubsub = results.metricsOf('floor', 'pubsub', round)?.p50Ms;
  for (const library of LOCK_LIBRARIES) {
    const serial = results.metricsOf('serial', library.id, round);
    if (serial && rtt.benchmark && rtt.ioredis) {
      serial.roundTrips = rtt.benchmark / serial.pairsPerSec;
      serial.ioredisRoundTrips = rtt.ioredis / serial.pairsPerSec;
    }
    const handoff = results.metricsOf('handoff', library.id, round);
    if (handoff && rtt.benchmark && rtt.ioredis) {
      handoff.roundTrips = (handoff.p50Ms * rtt.benchmark) / 1000;
      handoff.ioredisRoundTrips = (handoff.p50Ms * rtt.ioredis) / 1000;
    }
    if (handoff && pubsub !== undefined) handoff.overPubSubMs = handoff.p50Ms - pubsub;
  }
}
