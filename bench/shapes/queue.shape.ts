import type { QueueLibrary } from '../adapters/queue-adapter';
import { CpuMeter } from '../support/cpu-meter';
import { monotonicMs } from '../support/monotonic-clock';
import { requestCount } from '../support/request-counter';
import { type Metrics, type Shape } from './shape';

/** A queue name for one library and round (BullMQ does not allow ':' in queue names). */
function queueName(shape: string, libraryId: string, round: number): string {
  return `bench-${shape}-${libraryId}-${round}`;
}

/** Measures `work` (which handles `jobs` jobs): throughput, requests and CPU per job. */
async function measureJobs(url: string, jobs: number, work: () => Promise<void>): Promise<Metrics> {
  const meter = await CpuMeter.start(url);
  const requestsBefore = requestCount();
  const started = monotonicMs();
  await work();
  const elapsedMs = monotonicMs() - started;
  const requests = requestCount() - requestsBefore;
  const cpu = await meter.stop();
  return {
    jobsPerSec: (jobs / elapsedMs) * 1000,
    requestsPerJob: requests / jobs,
    clientCpuUsPerJob: cpu.clientUs / jobs,
    redisCpuUsPerJob: cpu.redisUs / jobs,
  };
}

/**
 * Queue shape: `config.queueJobs` jobs added one at a time by `config.producers` concurrent
 * producers in this process. Metrics: `jobsPerSec`, `requestsPerJob`, `clientCpuUsPerJob`,
 * `redisCpuUsPerJob`.
 */
export const enqueueShape: Shape<QueueLibrary> = {
  id: 'enqueue',
  title: 'queue enqueue: 50 concurrent producers, one job per call',
  async run(library, ctx) {
    const { queueJobs, producers } = ctx.config;
    const queue = queueName('enqueue', library.id, ctx.round);
    const adapter = await library.create(ctx.url);
    try {
      await adapter.enqueue(`${queue}-warm-up`, 'warm-up', { n: -1 });
      let next = 0;
      const producer = async () => {
        while (next < queueJobs) {
          const n = next++;
          await adapter.enqueue(queue, `job-${n}`, { n });
        }
      };
      return await measureJobs(ctx.url, queueJobs, async () => {
        await Promise.all(Array.from({ length: producers }, producer));
      });
    } finally {
      await adapter.close();
    }
  },
};

/**
 * Queue shape: `config.queueJobs` ready jobs (added untimed) drained by one consumer at
 * `concurrency` with a no-op handler; timed from starting the consumer to the last job handled.
 * Metrics: as the enqueue shape's.
 */
export function drainShape(concurrency: number): Shape<QueueLibrary> {
  return {
    id: `drain-${concurrency}`,
    title: `queue drain: one consumer, concurrency ${concurrency}`,
    async run(library, ctx) {
      const { queueJobs } = ctx.config;
      const queue = queueName(`drain${concurrency}`, library.id, ctx.round);
      const adapter = await library.create(ctx.url);
      try {
        await adapter.fill(queue, queueJobs);
        return await measureJobs(ctx.url, queueJobs, () =>
          adapter.drain(queue, queueJobs, concurrency),
        );
      } finally {
        await adapter.close();
      }
    },
  };
}
