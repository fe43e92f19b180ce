import type { LockLibrary } from '../adapters/lock-adapter';
import type { QueueLibrary } from '../adapters/queue-adapter';
import type { BenchConfig } from '../bench-config';
import { contendedShape } from './contended.shape';
import { crowdShape } from './crowd.shape';
import { flashSaleShape } from './flash-sale.shape';
import { handoffShape } from './handoff.shape';
import {
  distinctKeysShape,
  parallelShape,
  serialShape,
  type DistinctKeysShape,
} from './lock-throughput.shape';
import { parkedShape } from './parked.shape';
import { physicalFloorShape, type FloorProbe } from './physical-floor.shape';
import { drainShape, enqueueShape, groupsShape, rateLimitedShape } from './queue.shape';
import { flowsShape } from './queue-flows.shape';
import { cancelShape, waitForShape } from './queue-remote.shape';
import { semaphoreShape } from './semaphore.shape';
import type { Shape } from './shape';
import { wakeShape } from './wake.shape';

/** Every shape of a run, with the ids and titles `config` gives them. */
export interface BenchShapes {
  readonly floor: Shape<FloorProbe>;
  readonly serial: Shape<LockLibrary>;
  readonly parallel: Shape<LockLibrary>;
  /** Many distinct keys locked once each: what stays in Redis per key. */
  readonly distinctKeys: DistinctKeysShape;
  readonly contended: Shape<LockLibrary>;
  readonly handoff: Shape<LockLibrary>;
  /** A parked waiter woken by a release in another process, next to the pub/sub floor. */
  readonly wake: Shape<LockLibrary>;
  /** One crowd shape per `config.crowds`. */
  readonly crowd: readonly Shape<LockLibrary>[];
  /** One parked shape per `config.parkedWaiters`. */
  readonly parked: readonly Shape<LockLibrary>[];
  /** Semaphore of 5 permits over the contended processes, against `SEMAPHORE_LIBRARIES`. */
  readonly semaphore: Shape<LockLibrary>;
  /** The lock shapes every lock library runs, in run order. */
  readonly lock: readonly Shape<LockLibrary>[];
  /** Two instances of the sample app: ours only. */
  readonly flashSale: Shape<LockLibrary>;
  readonly enqueue: Shape<QueueLibrary>;
  /** One drain shape per `config.drainConcurrency`. */
  readonly drain: readonly Shape<QueueLibrary>[];
  readonly groups: Shape<QueueLibrary>;
  readonly rateLimited: Shape<QueueLibrary>;
  /** Completion seen on another instance: enqueue + waitFor here, a worker in another process. */
  readonly waitFor: Shape<QueueLibrary>;
  /** Cancel here → the running handler's signal aborted in another process (ours only). */
  readonly cancel: Shape<QueueLibrary>;
  /** Parent/child flows end to end (ours `enqueueFlow`, BullMQ `FlowProducer`). */
  readonly flows: Shape<QueueLibrary>;
}

/** The shapes of a run with `config`. */
export function benchShapes(config: BenchConfig): BenchShapes {
  const parallel = parallelShape(config);
  const distinctKeys = distinctKeysShape(config);
  const contended = contendedShape(config);
  const handoff = handoffShape(config);
  const wake = wakeShape(config);
  const crowd = config.crowds.map(([processes, callers]) => crowdShape(config, processes, callers));
  const parked = config.parkedWaiters.map((waiters) => parkedShape(config, waiters));
  return {
    floor: physicalFloorShape,
    serial: serialShape,
    parallel,
    distinctKeys,
    contended,
    handoff,
    wake,
    crowd,
    parked,
    lock: [serialShape, parallel, distinctKeys, contended, handoff, wake, ...crowd, ...parked],
    semaphore: semaphoreShape(config),
    flashSale: flashSaleShape(config),
    enqueue: enqueueShape(config),
    drain: config.drainConcurrency.map((c) => drainShape(config, c)),
    groups: groupsShape(config),
    rateLimited: rateLimitedShape(config),
    waitFor: waitForShape(config),
    cancel: cancelShape(config),
    flows: flowsShape(config),
  };
}
