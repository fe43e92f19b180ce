import type { QueueLibrary, StopConsumer } from '../adapters/queue-adapter';
import type { BenchConfig } from '../bench-config';
import { CpuMeter } from '../support/cpu-meter';
import { monotonicMs } from '../support/monotonic-clock';
import { requestCount } from '../support/request-counter';
import { type Metrics, type Shape } from './shape';

/** A queue name for one library and round (BullMQ does not allow ':' in queue names). */
export function queueName(shape: string, libraryId: string, round: number): string {
  return `bench-${shape}-${libraryId}-${round}`;
}

/**
 * Measures `work` (which handles `jobs` jobs, or other units named by `op`): throughput, requests
 * and CPU per unit (`jobsPerSec`, `requestsPerJob`, ... for `op` 'job'). When `work` resolves
 * with a `StopConsumer`, it is called after the measurement: stopping a consumer is not part of
 * the time.
 */
export async function measureJobs(
  url: string,
  jobs: number,
  work: () => Promise<StopConsumer | void>,
  op = 'job',
): Promise<Metrics> {
  const meter = await CpuMeter.start(url);
  const requestsBefore = requestCount();
  const started = monotonicMs();
  const stop = await work();
  const elapsedMs = monotonicMs() - started;
  const requests = requestCount() - requestsBefore;
  const cpu = await meter.stop();
  if (stop) await stop();
  const per = op[0].toUpperCase() + op.slice(1);
  return {
    [`${op}sPerSec`]: (jobs / elapsedMs) * 1000,
    [`requestsPer${per}`]: requests / jobs,
    [`clientCpuUsPer${per}`]: cpu.clientUs / jobs,
    [`redisCpuUsPer${per}`]: cpu.redisUs / jobs,
  };
}

/**
 * Queue shape: `config.queueJobs` jobs added one at a time by `config.producers` concurrent
 * producers in this process. Metrics: `jobsPerSec`, `requestsPerJob`, `clientCpuUsPerJob`,
 * `redisCpuUsPerJob`.
 */
export function enqueueShape(config: BenchConfig): Shape<QueueLibrary> {
  const { queueJobs, producers } = config;
  return {
    id: 'enqueue',
    title:
      `queue enqueue: ${producers} concurrent producers, one job per call, ` +
      `${queueJobs.toLocaleString('en-US')} jobs`,
    async run(library, ctx) {
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
}

/** The id of the drain shape at `concurrency` (results.json, targets). */
export function drainShapeId(concurrency: number): string {
  return `drain-${concurrency}`;
}

/**
 * Queue shape: `config.queueJobs` ready jobs (added untimed) drained by one consumer at
 * `concurrency` with a no-op handler; timed from starting the consumer to the last job handled
 * (stopping the consumer is not timed). Metrics: as the enqueue shape's.
 */
export function drainShape(config: BenchConfig, concurrency: number): Shape<QueueLibrary> {
  const { queueJobs } = config;
  return {
    id: drainShapeId(concurrency),
    title:
      `queue drain: one consumer, concurrency ${concurrency}, ` +
      `${queueJobs.toLocaleString('en-US')} jobs`,
    async run(library, ctx) {
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

/**
 * Queue shape: `config.queueJobs` ready jobs in `config.groups` groups (job n in group n mod
 * groups, added untimed), drained by one consumer at concurrency 10 with `groupConcurrency` 1 (a
 * group's jobs one after another), no-op handler. Metrics: as the enqueue shape's.
 */
export function groupsShape(config: BenchConfig): Shape<QueueLibrary> {
  const { queueJobs, groups } = config;
  return {
    id: 'groups',
    title:
      `queue groups: ${groups} groups, one job of a group at a time, one consumer at ` +
      `concurrency 10, ${queueJobs.toLocaleString('en-US')} jobs`,
    async run(library, ctx) {
      const queue = queueName('groups', library.id, ctx.round);
      const adapter = await library.create(ctx.url);
      try {
        await adapter.fill(queue, queueJobs, groups);
        return await measureJobs(ctx.url, queueJobs, () => adapter.drain(queue, queueJobs, 10));
      } finally {
        await adapter.close();
      }
    },
  };
}

/**
 * Queue shape: `4 × limiter.max` ready jobs drained by one consumer at concurrency 10 under a
 * rate limit of `config.limiter`: jobs/s shows how close a library gets to its limit, CPU per
 * job what waiting for the window costs.
 */
export function rateLimitedShape(config: BenchConfig): Shape<QueueLibrary> {
  const { limiter } = config;
  const jobs = 4 * limiter.max;
  return {
    id: 'rate-limited',
    title:
      `queue rate-limited: at most ${limiter.max} jobs per ${limiter.durationMs} ms, one ` +
      `consumer at concurrency 10, ${jobs.toLocaleString('en-US')} jobs`,
    async run(library, ctx) {
      const queue = queueName('limited', library.id, ctx.round);
      const adapter = await library.create(ctx.url);
      try {
        await adapter.fill(queue, jobs);
        return await measureJobs(ctx.url, jobs, () => adapter.drain(queue, jobs, 10, limiter));
      } finally {
        await adapter.close();
      }
    },
  };
}
