import type { LockLibrary } from '../adapters/lock-adapter';
import type { QueueLibrary } from '../adapters/queue-adapter';
import type { BenchConfig } from '../bench-config';
import { contendedShape } from './contended.shape';
import { handoffShape } from './handoff.shape';
import { parallelShape, serialShape } from './lock-throughput.shape';
import { physicalFloorShape, type FloorProbe } from './physical-floor.shape';
import { drainShape, enqueueShape, groupsShape, rateLimitedShape } from './queue.shape';
import type { Shape } from './shape';

/** Every shape of a run, with the ids and titles `config` gives them. */
export interface BenchShapes {
  readonly floor: Shape<FloorProbe>;
  readonly serial: Shape<LockLibrary>;
  readonly parallel: Shape<LockLibrary>;
  readonly contended: Shape<LockLibrary>;
  readonly handoff: Shape<LockLibrary>;
  /** The four lock shapes, in run order. */
  readonly lock: readonly Shape<LockLibrary>[];
  readonly enqueue: Shape<QueueLibrary>;
  /** One drain shape per `config.drainConcurrency`. */
  readonly drain: readonly Shape<QueueLibrary>[];
  readonly groups: Shape<QueueLibrary>;
  readonly rateLimited: Shape<QueueLibrary>;
}

/** The shapes of a run with `config`. */
export function benchShapes(config: BenchConfig): BenchShapes {
  const parallel = parallelShape(config);
  const contended = contendedShape(config);
  const handoff = handoffShape(config);
  return {
    floor: physicalFloorShape,
    serial: serialShape,
    parallel,
    contended,
    handoff,
    lock: [serialShape, parallel, contended, handoff],
    enqueue: enqueueShape(config),
    drain: config.drainConcurrency.map((c) => drainShape(config, c)),
    groups: groupsShape(config),
    rateLimited: rateLimitedShape(config),
  };
}
