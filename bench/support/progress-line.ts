import type { Metrics } from '../shapes/shape';

/** The one-line summary of a shape's metrics printed while the run goes on. */
export function progressLine(shape: string, m: Metrics): string {
  const n = (v: number, d = 0) => (Number.isFinite(v) ? v.toFixed(d) : '—');
  switch (shape) {
    case 'floor':
      return m.requestsPerSec === undefined
        ? `p50 ${n(m.p50Ms, 3)} ms, p99 ${n(m.p99Ms, 3)} ms`
        : `${n(m.requestsPerSec)} round trips/s, p50 ${n(m.p50Ms, 3)} ms`;
    case 'serial':
    case 'parallel-64':
      return (
        `${n(m.pairsPerSec)} pairs/s, ${n(m.requestsPerPair, 2)} requests/pair, CPU µs/pair ` +
        `client ${n(m.clientCpuUsPerPair, 1)} redis ${n(m.redisCpuUsPerPair, 1)}`
      );
    case 'contended-8':
      return (
        `${n(m.handoffsPerSec)} handoffs/s, wait p50 ${n(m.waitP50Ms, 2)} / p99 ${n(m.waitP99Ms, 1)} / ` +
        `max ${n(m.waitMaxMs, 1)} ms, Jain ${n(m.jain, 3)}, overlaps ${m.overlaps}, failures ${m.failures}`
      );
    case 'handoff':
      return `p50 ${n(m.p50Ms, 3)} ms, p99 ${n(m.p99Ms, 3)} ms, ${n(m.requestsPerHandoff, 1)} requests, failures ${m.failures}`;
    default:
      return (
        `${n(m.jobsPerSec)} jobs/s, ${n(m.requestsPerJob, 2)} requests/job, CPU µs/job ` +
        `client ${n(m.clientCpuUsPerJob, 1)} redis ${n(m.redisCpuUsPerJob, 1)}`
      );
  }
}
