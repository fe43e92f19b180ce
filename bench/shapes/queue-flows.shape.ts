import type { QueueLibrary } from '../adapters/queue-adapter';
import type { BenchConfig } from '../bench-config';
import { measureJobs, queueName } from './queue.shape';
import type { Shape } from './shape';

/** Flows added at once by the flows shape's producers. */
const FLOWS_IN_FLIGHT = 50;
/** Concurrency of each consumer (parents, and each of the two child queues). */
const FLOW_CONCURRENCY = 50;

/**
 * Queue shape (libraries with flows): `config.flows` flows, each a parent with
 * `config.flowChildren` children over two child queues, end to end: the consumers start, the flows
 * are added (50 at once), each parent runs once its children completed and reads their results;
 * timed to the last parent handled. Metrics: `flowsPerSec`, `requestsPerFlow`,
 * `clientCpuUsPerFlow`, `redisCpuUsPerFlow`.
 */
export function flowsShape(config: BenchConfig): Shape<QueueLibrary> {
  const { flows, flowChildren } = config;
  return {
    id: 'flows',
    title:
      `queue flows: ${flows.toLocaleString('en-US')} flows of 1 parent × ${flowChildren} ` +
      `children (3 queues), added ${FLOWS_IN_FLIGHT} at once, consumers at concurrency ` +
      `${FLOW_CONCURRENCY}, enqueue → every parent done`,
    async run(library, ctx) {
      const base = queueName('flows', library.id, ctx.round);
      const adapter = await library.create(ctx.url);
      try {
        if (!adapter.runFlows) throw new Error(`${library.label} has no flows`);
        const run = adapter.runFlows.bind(adapter);
        return await measureJobs(
          ctx.url,
          flows,
          () =>
            run({
              parentQueue: `${base}-parents`,
              childQueues: [`${base}-children-a`, `${base}-children-b`],
              count: flows,
              children: flowChildren,
              concurrency: FLOW_CONCURRENCY,
              inFlight: FLOWS_IN_FLIGHT,
            }),
          'flow',
        );
      } finally {
        await adapter.close();
      }
    },
  };
}
