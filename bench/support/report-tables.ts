import { CONTENDED_LIBRARIES, LOCK_LIBRARIES } from '../adapters/lock-libraries';
import { SEMAPHORE_LIBRARIES } from '../adapters/semaphore-libraries';
import {
  CANCEL_LIBRARIES,
  FLOW_LIBRARIES,
  DRAIN_LIBRARIES,
  ENQUEUE_LIBRARIES,
  GROUP_LIBRARIES,
  LIMITED_LIBRARIES,
  NOT_SUPPORTED,
  WAIT_LIBRARIES,
} from '../adapters/queue-libraries';
import type { BenchConfig } from '../bench-config';
import type { BenchShapes } from '../shapes/bench-shapes';
import { FLOOR_PROBES } from '../shapes/physical-floor.shape';
import { PARKED_WAITS } from '../shapes/queue-remote.shape';
import type { Column, TableSpec } from './bench-report';

/**
 * Requests, then the CPU time of each of `cpu`, per `op`: for `'pair'`, `requestsPerPair`,
 * `clientCpuUsPerPair` (this process) and `redisCpuUsPerPair` (the redis-server).
 */
function costColumns(
  op: string,
  cpu: readonly ('client' | 'redis')[] = ['client', 'redis'],
): Column[] {
  const per = op[0].toUpperCase() + op.slice(1);
  const cpuHeader = { client: 'client CPU', redis: 'Redis CPU' };
  return [
    { metric: `requestsPer${per}`, header: `requests/${op}`, digits: 2 },
    ...cpu.map((of) => ({
      metric: `${of}CpuUsPer${per}`,
      header: `${cpuHeader[of]} µs/${op}`,
      digits: 1,
    })),
  ];
}

/**
 * p50, p99 and (unless `max: false`) max of a latency, in ms: metrics `p50Ms`… or, with a
 * `prefix`, `waitP50Ms`…; headers `p50 ms`… or `wait p50 ms`….
 */
function latencyColumns(prefix: string, digits: number, { max = true } = {}): Column[] {
  const stats = max ? ['p50', 'p99', 'max'] : ['p50', 'p99'];
  return stats.map((stat) => ({
    metric: prefix ? `${prefix}${stat[0].toUpperCase()}${stat.slice(1)}Ms` : `${stat}Ms`,
    header: prefix ? `${prefix} ${stat} ms` : `${stat} ms`,
    digits,
  }));
}

/** Acquisitions a library gave up on (total over rounds), and how long they had waited. */
const FAILED_ACQUIRES: Column[] = [
  { metric: 'failures', header: 'failed acquires', digits: 0, sum: true },
  { metric: 'gaveUpAfterMs', header: 'gave up after ms (median)', digits: 0 },
];

/**
 * The columns of the contended loop (`summarizeContended`), with the given headers and Jain
 * columns (default: one, over processes).
 */
function sectionColumns(
  throughput: string,
  overlaps: string,
  jain: Column[] = [{ metric: 'jain', header: 'Jain', digits: 3 }],
): Column[] {
  return [
    { metric: 'handoffsPerSec', header: throughput, digits: 0 },
    ...latencyColumns('wait', 2),
    ...jain,
    { metric: 'overlaps', header: overlaps, digits: 0, sum: true },
    ...FAILED_ACQUIRES,
  ];
}

const ROUND_TRIP: Column = { metric: 'roundTripMs', header: 'ioredis round trip ms', digits: 3 };

const throughputColumns = (op: string): Column[] => [
  { metric: `${op}sPerSec`, header: `${op}s/s`, digits: 0 },
  ...costColumns(op),
];

/** The tables of the shapes of locks under a crowd: crowd, parked and flash sale. */
function crowdTables(shapes: BenchShapes, config: BenchConfig): TableSpec[] {
  const lock = LOCK_LIBRARIES;
  const ours = lock.filter((l) => l.id === 'ours');
  const specs: TableSpec[] = shapes.crowd.map((shape) => ({
    shape: shape.id,
    title: shape.title,
    rows: lock,
    columns: [
      ...sectionColumns('handoffs/s', 'overlaps', [
        { metric: 'jain', header: 'Jain processes', digits: 3 },
        { metric: 'jainCallers', header: 'Jain callers', digits: 3 },
      ]),
      ...costColumns('section', ['redis']),
    ],
    ratioOf: 'handoffsPerSec',
  }));
  for (const shape of shapes.parked) {
    specs.push({
      shape: shape.id,
      title: shape.title,
      rows: lock,
      columns: [
        { metric: 'commandsPerSec', header: 'Redis commands/s while parked', digits: 0 },
        { metric: 'redisCpuPct', header: 'Redis CPU % while parked', digits: 1 },
        { metric: 'drainMs', header: 'drain ms', digits: 0 },
        { metric: 'acquired', header: 'got the lock', digits: 0 },
        { metric: 'gaveUp', header: 'gave up', digits: 0 },
        { metric: 'unfinished', header: 'still waiting at the cut-off', digits: 0 },
      ],
      note:
        `Each waiter may wait ${config.parkedWaitMs / 1000} s (ours \`waitMs\`, redis-semaphore ` +
        "`acquireTimeout`, the original design's deadline); redlock and its fork keep their " +
        'default 10 retries (about 2–3 s), so their waiters give up during the hold and their ' +
        'window may include waiters that gave up already. Commands: `INFO commandstats` calls, ' +
        "commands run inside scripts included, the meter's own `INFO` left out. The drain is " +
        `cut off ${config.parkedDrainCapMs / 1000} s after the release: waiters still waiting ` +
        'then are counted, and the drain has no time (—). Gave up / got the lock / still ' +
        'waiting: median over rounds.',
    });
  }
  specs.push({
    shape: shapes.flashSale.id,
    title: shapes.flashSale.title,
    rows: ours,
    columns: [
      { metric: 'sellPerSec', header: 'units sold/s at the hot key', digits: 0 },
      { metric: 'ceilingPerSec', header: 'HTTP ceiling GET/s', digits: 0 },
      { metric: 'sellToCeiling', header: 'sell ÷ ceiling', digits: 2, derived: true },
      { metric: 'locked', header: '423 answers', digits: 0, sum: true },
      { metric: 'buyP50Ms', header: 'buy p50 ms', digits: 0 },
      { metric: 'buyP99Ms', header: 'buy p99 ms', digits: 0 },
      { metric: 'rowP50Ms', header: 'buy→row p50 ms', digits: 0 },
      { metric: 'rowP99Ms', header: 'buy→row p99 ms', digits: 0 },
      { metric: 'rowsPerSec', header: 'rows/s', digits: 0 },
      { metric: 'unavailable', header: '503 answers', digits: 0, sum: true },
      { metric: 'sold', header: 'units sold', digits: 0 },
      { metric: 'oversold', header: 'oversold', digits: 0, sum: true },
      { metric: 'lost', header: 'lost', digits: 0, sum: true },
      { metric: 'unexpected', header: 'unexpected answers', digits: 0, sum: true },
    ],
    note:
      'Ours only: this is the sample app of this library (`sample/`, as it ships: stock lock ' +
      'with `waitMs` 2 s, default module options), two instances in child processes on the ' +
      'bench Redis; the peers have no such app here. Sell rate: units per second at the hot ' +
      "key, from the orders' `boughtAt` (first to last unit). HTTP ceiling: `GET` of the " +
      "sale's status by the same connections against the same instances, measured in the same " +
      'round right before the sale (it reads the stock in Redis and counts the rows in ' +
      'PostgreSQL). Buy latencies: every buy answer (202, 409, 410, 423 and 503). The orders ' +
      'are rows in a private PostgreSQL both instances share (`initdb` + `postgres`, fsync ' +
      "off), written by the sample's batch worker; buy→row: each row's `createdAt` minus its " +
      '`boughtAt`; rows/s: first row to last; lost: units sold without a row.',
  });
  return specs;
}

/** The tables of RESULTS.md, in order; the queue tables only when the queue shapes ran. */
export function reportTables(
  shapes: BenchShapes,
  config: BenchConfig,
  queues: boolean,
): TableSpec[] {
  const lock = LOCK_LIBRARIES;
  const specs: TableSpec[] = [
    {
      shape: shapes.floor.id,
      title: shapes.floor.title,
      rows: FLOOR_PROBES.map((p) => ({ ...p, ours: false })),
      columns: [
        { metric: 'requestsPerSec', header: 'round trips/s', digits: 0 },
        ...latencyColumns('', 3, { max: false }),
        { metric: 'sectionsPerSec', header: 'sections/s', digits: 0 },
        { metric: 'pairsPerSec', header: 'pairs/s', digits: 0 },
      ],
    },
    {
      shape: shapes.serial.id,
      title: shapes.serial.title,
      rows: lock,
      columns: [
        ...throughputColumns('pair'),
        ROUND_TRIP,
        { metric: 'roundTrips', header: 'pair = N round trips', digits: 1, derived: true },
      ],
      ratioOf: 'pairsPerSec',
    },
    {
      shape: shapes.parallel.id,
      title: shapes.parallel.title,
      rows: lock,
      columns: throughputColumns('pair'),
      ratioOf: 'pairsPerSec',
    },
    {
      shape: shapes.distinctKeys.id,
      title: shapes.distinctKeys.title,
      rows: lock,
      columns: [
        ...throughputColumns('pair'),
        { metric: 'keysLeftPer1000', header: 'keys left per 1,000 keys', digits: 1 },
        { metric: 'bytesLeftPerKey', header: 'bytes left per key', digits: 1 },
      ],
      note:
        'After every lock was released: the keys the redis-server holds now minus before the ' +
        'loops, and its `used_memory` now minus before, per distinct key (allocator noise of a ' +
        'few KB in all is spread over the keys; a negative figure is that noise).',
    },
    {
      shape: shapes.contended.id,
      title: shapes.contended.title,
      rows: CONTENDED_LIBRARIES,
      columns: [...sectionColumns('handoffs/s', 'overlaps'), ...costColumns('section', ['redis'])],
      ratioOf: 'handoffsPerSec',
      note:
        'The fair floor is not a lock: the least a fair lock with direct handoff does (a waiter ' +
        'joins a list in one script; the release pops the next, makes it the holder and publishes ' +
        'to it), without TTLs, fences or recovery (bench/adapters/fair-floor.adapter.ts). Its ' +
        'Redis CPU against the unfair peers is what handing the lock to another process costs ' +
        'by itself; no target compares with it.',
    },
    {
      shape: shapes.handoff.id,
      title: shapes.handoff.title,
      rows: lock,
      columns: [
        ...latencyColumns('', 3),
        { metric: 'overPubSubMs', header: 'p50 above pub/sub floor ms', digits: 3, derived: true },
        ROUND_TRIP,
        { metric: 'roundTrips', header: 'p50 = N round trips', digits: 1, derived: true },
        ...costColumns('handoff', []),
        ...FAILED_ACQUIRES,
      ],
    },
    {
      shape: shapes.wake.id,
      title: shapes.wake.title,
      rows: lock,
      columns: [
        { metric: 'p50Ms', header: 'p50 ms', digits: 3 },
        { metric: 'p90Ms', header: 'p90 ms', digits: 3 },
        { metric: 'maxMs', header: 'max ms', digits: 3 },
        { metric: 'floorP50Ms', header: 'pub/sub floor p50 ms', digits: 3 },
        { metric: 'floorP90Ms', header: 'pub/sub floor p90 ms', digits: 3 },
        { metric: 'overFloorMs', header: 'p50 above floor ms', digits: 3, derived: true },
        { metric: 'overFloorP90Ms', header: 'p90 above floor ms', digits: 3, derived: true },
        ...costColumns('handoff', []),
        ...FAILED_ACQUIRES,
      ],
      note:
        'Latency: from just before process A calls release to the acquire of process B ' +
        '(parked behind A, its event loop idle) resolving. Floor: plain ioredis `PUBLISH` in A ' +
        'to `SUBSCRIBE` in B with the same idle gap, measured right before each handoff by the ' +
        'same two processes.',
    },
    ...crowdTables(shapes, config),
    {
      shape: shapes.semaphore.id,
      title: shapes.semaphore.title,
      rows: SEMAPHORE_LIBRARIES,
      columns: [
        ...sectionColumns('sections/s', 'above limit'),
        { metric: 'requestsPerSection', header: 'requests/section', digits: 2 },
        { metric: 'parkedRequestsPerSec', header: 'parked: requests/s', digits: 0 },
        { metric: 'parkedCommandsPerSec', header: 'parked: Redis commands/s', digits: 0 },
        { metric: 'parkedRedisCpuUsPerSec', header: 'parked: Redis CPU µs/s', digits: 0 },
      ],
      ratioOf: 'handoffsPerSec',
    },
  ];
  if (!queues) return specs;
  for (const shape of [shapes.enqueue, ...shapes.drain]) {
    const enqueue = shape === shapes.enqueue;
    specs.push({
      shape: shape.id,
      title: shape.title,
      rows: enqueue ? ENQUEUE_LIBRARIES : DRAIN_LIBRARIES,
      columns: throughputColumns('job'),
      ratioOf: 'jobsPerSec',
      note: enqueue ? ENQUEUE_NOTE : DRAIN_NOTE,
    });
  }
  specs.push(
    {
      shape: shapes.groups.id,
      title: shapes.groups.title,
      rows: GROUP_LIBRARIES,
      columns: throughputColumns('job'),
      note: NOT_SUPPORTED.groups,
    },
    {
      shape: shapes.rateLimited.id,
      title: shapes.rateLimited.title,
      rows: LIMITED_LIBRARIES,
      columns: throughputColumns('job'),
      ratioOf: 'jobsPerSec',
    },
    {
      shape: shapes.waitFor.id,
      title: shapes.waitFor.title,
      rows: WAIT_LIBRARIES,
      columns: [
        { metric: 'p50Ms', header: 'p50 ms', digits: 2 },
        { metric: 'p90Ms', header: 'p90 ms', digits: 2 },
        { metric: 'p99Ms', header: 'p99 ms', digits: 2 },
        { metric: 'maxMs', header: 'max ms', digits: 2 },
        { metric: 'tasksPerSec', header: 'tasks/s', digits: 0 },
        { metric: 'requestsPerTask', header: 'requests/task (this process)', digits: 2 },
        { metric: 'clientCpuUsPerTask', header: 'this process CPU µs/task', digits: 1 },
        { metric: 'workerCpuUsPerTask', header: 'worker process CPU µs/task', digits: 1 },
        { metric: 'redisCpuUsPerTask', header: 'Redis CPU µs/task', digits: 1 },
        { metric: 'failures', header: 'failed waits', digits: 0, sum: true },
        { metric: 'parkedCommandsPerSec', header: 'parked: Redis commands/s', digits: 1 },
        { metric: 'parkedRedisCpuPct', header: 'parked: Redis CPU %', digits: 2 },
        { metric: 'parkedEndedEarly', header: 'parked: ended early', digits: 0, sum: true },
      ],
      note:
        'Latency: from just before the enqueue to the wait resolving with the right result, in ' +
        'the process that enqueued (ours `enqueue` + `waitFor(queue, id)`; BullMQ `add` + ' +
        '`job.waitUntilFinished(queueEvents)`, one `QueueEvents` for the queue, connected before ' +
        'the measurement). The worker (handler returns `{ n }` at once) runs in another process ' +
        '(its CPU: `process.cpuUsage()` there). Both libraries with their defaults: results kept, ' +
        'events on. With a fixed number in flight, latency × throughput = in flight: on a busy ' +
        'machine the latencies follow the CPU each task costs in the three processes. Parked: ' +
        `the worker stopped, ${PARKED_WAITS.toLocaleString('en-US')} tasks enqueued and awaited ` +
        '(each wait willing to wait 120 s); after a settle time, the commands per second the ' +
        'redis-server ran (inside scripts included) and its CPU over the window; waits that ' +
        'ended while nothing ran them must be 0.',
    },
    {
      shape: shapes.cancel.id,
      title: shapes.cancel.title,
      rows: CANCEL_LIBRARIES,
      columns: [
        { metric: 'p50Ms', header: 'one at a time: p50 ms', digits: 2 },
        { metric: 'p99Ms', header: 'p99 ms', digits: 2 },
        { metric: 'maxMs', header: 'max ms', digits: 2 },
        { metric: 'burstP50Ms', header: 'in a burst: p50 ms', digits: 2 },
        { metric: 'burstP99Ms', header: 'p99 ms', digits: 2 },
        { metric: 'burstMaxMs', header: 'max ms', digits: 2 },
        { metric: 'floorP50Ms', header: 'pub/sub floor: one p50 ms', digits: 2 },
        { metric: 'floorP99Ms', header: 'one p99 ms', digits: 2 },
        { metric: 'floorBurstP50Ms', header: 'burst p50 ms', digits: 2 },
        { metric: 'floorBurstP99Ms', header: 'burst p99 ms', digits: 2 },
        { metric: 'callP50Ms', header: 'cancel call p50 ms', digits: 2 },
        { metric: 'notSignalled', header: "answers not 'signalled'", digits: 0, sum: true },
        { metric: 'notAborted', header: 'signals not aborted', digits: 0, sum: true },
        { metric: 'leftLeased', header: 'left leased', digits: 0, sum: true },
        { metric: 'notCancelled', header: 'not ended cancelled', digits: 0, sum: true },
      ],
      note:
        `Latency: from just before \`cancel(queue, id)\` is called in this process to the ` +
        "running handler's `task.signal` aborting in the worker process (shared monotonic clock, " +
        'checked before). A burst: that many tasks running at once, all cancelled together, each ' +
        'timed from its own call. Pub/sub floor: right before each cancel (each burst), while its ' +
        'tasks run, as many plain ioredis `PUBLISH`es from this process to a plain subscriber in ' +
        'the worker process, all at once, each timed the same way: what any cancel that travels ' +
        `by pub/sub costs at the least at that moment. ${NOT_SUPPORTED.cancel}.`,
    },
    {
      shape: shapes.flows.id,
      title: shapes.flows.title,
      rows: FLOW_LIBRARIES,
      columns: throughputColumns('flow'),
      ratioOf: 'flowsPerSec',
      note:
        'End to end, from starting the consumers to the last parent handled: ours ' +
        '`enqueueFlow` (a parent waits in `waiting-children`; the ack of its last child makes it ' +
        "ready in the same script), the parent's handler reading `task.childResults()`; BullMQ " +
        '`FlowProducer.add`, the parent reading `job.getChildrenValues()`. Children return ' +
        '`{ done: id }`; both with their defaults (results kept, events on).',
    },
  );
  return specs;
}

/** Under the enqueue table: what each row does. */
const ENQUEUE_NOTE =
  'Both with their defaults: each add also writes an event (ours `enqueued`; BullMQ `added` and ' +
  "`waiting`) to the queue's capped event stream (10,000 entries for both). Each producer calls " +
  '`enqueue` / `queue.add` with one job and awaits it; ours merges the calls its producers make ' +
  'in one tick into one script run, or two (halves that alternate, so that the producers and ' +
  'Redis work side by side; docs/queue.md, "Calls of one tick are merged"): hence ' +
  'requests/job below 1. BullMQ has no such merge for `add` (its `addBulk` takes one list from ' +
  'one caller).';

/** Under the drain tables: what the rows keep and write. */
const DRAIN_NOTE =
  'Every handler returns a small result (`{ done: id }`). Defaults: ours keeps results ' +
  '(`keepCompleted` 1 day / 1,000 tasks) and writes events (`active`, `completed`: two stream ' +
  "entries per task, `eventsMaxLen` 10,000); BullMQ's defaults keep every completed job with its " +
  'return value and write its events (10,000). `removeOnComplete: true` deletes the job at ' +
  'completion (events still on); "results not kept, events off" is ours with ' +
  '`keepCompleted: { ageMs: 0, count: 0 }` and `eventsMaxLen: 0`: what the two cost. The queue ' +
  "targets compare the first row with BullMQ's defaults.";
