import { DRAIN_LIBRARIES, ENQUEUE_LIBRARIES } from '../adapters/queue-libraries';
import { LOCK_LIBRARIES } from '../adapters/lock-libraries';
import type { BenchConfig } from '../bench-config';
import { contendedShape } from '../shapes/contended.shape';
import { handoffShape } from '../shapes/handoff.shape';
import { parallelShape, serialShape } from '../shapes/lock-throughput.shape';
import { FLOOR_PROBES, physicalFloorShape } from '../shapes/physical-floor.shape';
import { drainShape, enqueueShape } from '../shapes/queue.shape';
import type { TableSpec } from './bench-report';

const THROUGHPUT_COLUMNS = [
  { metric: 'pairsPerSec', header: 'pairs/s', digits: 0 },
  { metric: 'requestsPerPair', header: 'requests/pair', digits: 2 },
  { metric: 'clientCpuUsPerPair', header: 'client CPU µs/pair', digits: 1 },
  { metric: 'redisCpuUsPerPair', header: 'Redis CPU µs/pair', digits: 1 },
];
const QUEUE_COLUMNS = [
  { metric: 'jobsPerSec', header: 'jobs/s', digits: 0 },
  { metric: 'requestsPerJob', header: 'requests/job', digits: 2 },
  { metric: 'clientCpuUsPerJob', header: 'client CPU µs/job', digits: 1 },
  { metric: 'redisCpuUsPerJob', header: 'Redis CPU µs/job', digits: 1 },
];

/** The tables of RESULTS.md, in order; the queue tables only when the queue shapes ran. */
export function reportTables(config: BenchConfig, queues: boolean): TableSpec[] {
  const lock = LOCK_LIBRARIES;
  const specs: TableSpec[] = [
    {
      shape: 'floor',
      title: physicalFloorShape.title,
      rows: FLOOR_PROBES.map((p) => ({ ...p, ours: false })),
      columns: [
        { metric: 'requestsPerSec', header: 'round trips/s', digits: 0 },
        { metric: 'p50Ms', header: 'p50 ms', digits: 3 },
        { metric: 'p99Ms', header: 'p99 ms', digits: 3 },
      ],
    },
    {
      shape: 'serial',
      title: serialShape.title,
      rows: lock,
      columns: [
        ...THROUGHPUT_COLUMNS,
        { metric: 'roundTrips', header: 'pair = N redis-benchmark round trips', digits: 1 },
        { metric: 'ioredisRoundTrips', header: 'pair = N ioredis round trips', digits: 1 },
      ],
      ratioOf: 'pairsPerSec',
    },
    {
      shape: 'parallel-64',
      title: parallelShape.title,
      rows: lock,
      columns: THROUGHPUT_COLUMNS,
      ratioOf: 'pairsPerSec',
    },
    {
      shape: 'contended-8',
      title: `${contendedShape.title} (${config.contendedMs / 1000} s)`,
      rows: lock,
      columns: [
        { metric: 'handoffsPerSec', header: 'handoffs/s', digits: 0 },
        { metric: 'waitP50Ms', header: 'wait p50 ms', digits: 2 },
        { metric: 'waitP99Ms', header: 'wait p99 ms', digits: 1 },
        { metric: 'waitMaxMs', header: 'wait max ms', digits: 1 },
        { metric: 'jain', header: 'Jain', digits: 3 },
        { metric: 'overlaps', header: 'overlaps', digits: 0, sum: true },
        { metric: 'failures', header: 'failed acquires', digits: 0, sum: true },
        { metric: 'requestsPerSection', header: 'requests/section', digits: 1 },
        { metric: 'redisCpuUsPerSection', header: 'Redis CPU µs/section', digits: 0 },
      ],
      ratioOf: 'handoffsPerSec',
    },
    {
      shape: 'handoff',
      title: `${handoffShape.title} (${config.handoffRounds} handoffs per round)`,
      rows: lock,
      columns: [
        { metric: 'p50Ms', header: 'p50 ms', digits: 3 },
        { metric: 'p99Ms', header: 'p99 ms', digits: 3 },
        { metric: 'maxMs', header: 'max ms', digits: 3 },
        { metric: 'overPubSubMs', header: 'p50 above pub/sub floor ms', digits: 3 },
        { metric: 'roundTrips', header: 'p50 = N redis-benchmark round trips', digits: 1 },
        { metric: 'requestsPerHandoff', header: 'requests/handoff', digits: 1 },
        { metric: 'failures', header: 'failed acquires', digits: 0, sum: true },
      ],
    },
  ];
  if (!queues) return specs;
  specs.push({
    shape: 'enqueue',
    title: `${enqueueShape.title}, ${config.queueJobs.toLocaleString('en-US')} jobs`,
    rows: ENQUEUE_LIBRARIES,
    columns: QUEUE_COLUMNS,
    ratioOf: 'jobsPerSec',
  });
  for (const c of config.drainConcurrency) {
    specs.push({
      shape: `drain-${c}`,
      title: `${drainShape(c).title}, ${config.queueJobs.toLocaleString('en-US')} jobs`,
      rows: DRAIN_LIBRARIES,
      columns: QUEUE_COLUMNS,
      ratioOf: 'jobsPerSec',
    });
  }
  return specs;
}
