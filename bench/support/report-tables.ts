import { LOCK_LIBRARIES } from '../adapters/lock-libraries';
import {
  DRAIN_LIBRARIES,
  ENQUEUE_LIBRARIES,
  GROUP_LIBRARIES,
  LIMITED_LIBRARIES,
  NOT_SUPPORTED,
} from '../adapters/queue-libraries';
import type { BenchShapes } from '../shapes/bench-shapes';
import { FLOOR_PROBES } from '../shapes/physical-floor.shape';
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

const ROUND_TRIP: Column = { metric: 'roundTripMs', header: 'ioredis round trip ms', digits: 3 };

const throughputColumns = (op: string): Column[] => [
  { metric: `${op}sPerSec`, header: `${op}s/s`, digits: 0 },
  ...costColumns(op),
];

/** The tables of RESULTS.md, in order; the queue tables only when the queue shapes ran. */
export function reportTables(shapes: BenchShapes, queues: boolean): TableSpec[] {
  const lock = LOCK_LIBRARIES;
  const specs: TableSpec[] = [
    {
      shape: shapes.floor.id,
      title: shapes.floor.title,
      rows: FLOOR_PROBES.map((p) => ({ ...p, ours: false })),
      columns: [
        { metric: 'requestsPerSec', header: 'round trips/s', digits: 0 },
        ...latencyColumns('', 3, { max: false }),
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
      shape: shapes.contended.id,
      title: shapes.contended.title,
      rows: lock,
      columns: [
        { metric: 'handoffsPerSec', header: 'handoffs/s', digits: 0 },
        ...latencyColumns('wait', 2),
        { metric: 'jain', header: 'Jain', digits: 3 },
        { metric: 'overlaps', header: 'overlaps', digits: 0, sum: true },
        ...FAILED_ACQUIRES,
        ...costColumns('section', ['redis']),
      ],
      ratioOf: 'handoffsPerSec',
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
  ];
  if (!queues) return specs;
  for (const shape of [shapes.enqueue, ...shapes.drain]) {
    specs.push({
      shape: shape.id,
      title: shape.title,
      rows: shape === shapes.enqueue ? ENQUEUE_LIBRARIES : DRAIN_LIBRARIES,
      columns: throughputColumns('job'),
      ratioOf: 'jobsPerSec',
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
  );
  return specs;
}
