import type { INestApplicationContext } from '@nestjs/common';
import { QueueService, type QueueDefaults } from '../../lib';
import { oursApp } from './ours-app';
import {
  addFlows,
  countdown,
  FILL_BATCH,
  type FlowRun,
  handedBackAfter,
  jobResult,
  type JobHandler,
  type Limit,
  type QueueAdapter,
  type StopConsumer,
} from './queue-adapter';

/** How the drain shape consumes our queue. */
export type OursDrainMode = 'leased' | 'pop' | 'batch';

/** Tasks per call of the batch drain mode. */
export const BATCH_SIZE = 100;

/** Methods of `QueueService` the queue shapes use (the spec's API). */
const NEEDED = ['enqueue', 'pop', 'claim', 'ack', 'process', 'waitFor', 'cancel'] as const;

/**
 * Why the queue shapes cannot run against this checkout (a `QueueService` method they need is
 * missing), or `undefined` when they can.
 */
export function oursQueueMissing(): string | undefined {
  const proto = QueueService.prototype as unknown as Record<string, unknown>;
  const missing = NEEDED.filter((m) => typeof proto[m] !== 'function');
  return missing.length ? `QueueService has no ${missing.join(', ')} yet` : undefined;
}

/**
 * nestjs-redis-lock's queue through its public API, default options (results kept per
 * `keepCompleted`, events on) unless `queue` options are given. `leased` drains with a worker
 * (`QueueService.process`: claim, run, ack); `pop` with `concurrency` loops of `pop(queue, 1)`
 * (at-most-once, no lease).
 */
export class OursQueueAdapter implements QueueAdapter {
  private constructor(
    private readonly app: INestApplicationContext,
    private readonly queues: QueueService,
    private readonly mode: OursDrainMode,
  ) {}

  /**
   * @param url the bench Redis
   * @param mode how `drain` consumes
   * @param queue the module's queue options (a row that is not the defaults says so in its label)
   */
  static async create(
    url: string,
    mode: OursDrainMode,
    queue?: QueueDefaults,
  ): Promise<OursQueueAdapter> {
    const app = await oursApp({ redis: url, ...(queue ? { queue } : {}) });
    return new OursQueueAdapter(app, app.get(QueueService), mode);
  }

  async enqueue(queue: string, id: string, payload: Record<string, unknown>): Promise<void> {
    await this.queues.enqueue(queue, id, { payload });
  }

  async fill(queue: string, count: number, groups?: number): Promise<void> {
    for (let start = 0; start < count; start += FILL_BATCH) {
      const ids = Array.from({ length: Math.min(FILL_BATCH, count - start) }, (_, i) => start + i);
      await Promise.all(
        ids.map((n) =>
          this.queues.enqueue(queue, `job-${n}`, {
            payload: { n },
            ...(groups ? { group: `g${n % groups}` } : {}),
          }),
        ),
      );
    }
  }

  drain(queue: string, count: number, concurrency: number, limiter?: Limit): Promise<StopConsumer> {
    const done = countdown(count);
    if (this.mode === 'batch') {
      // A batch worker (size BATCH_SIZE): `concurrency` batches at once, one round trip per batch.
      const worker = this.queues.process(
        queue,
        async (tasks) => {
          for (const task of tasks) done.tick(task.id);
          return tasks.map((task) => jobResult(task.id));
        },
        { concurrency, batch: { size: BATCH_SIZE }, ...(limiter ? { limiter } : {}) },
      );
      return handedBackAfter(done.finished, () => worker.close());
    }
    if (this.mode === 'leased') {
      const worker = this.queues.process(
        queue,
        async (task) => {
          done.tick(task.id);
          return jobResult(task.id);
        },
        {
          concurrency,
          ...(limiter ? { limiter } : {}),
        },
      );
      return handedBackAfter(done.finished, () => worker.close());
    }
    let popped = 0;
    const loops = Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (;;) {
          const tasks = await this.queues.pop(queue, 1);
          if (tasks.length === 0) return;
          popped += tasks.length;
          tasks.forEach((task) => done.tick(task.id));
        }
      }),
    ).then(() => {
      if (popped !== count) throw new Error(`popped ${popped} of ${count} jobs`);
    });
    // The loops end on their next (empty) pop after the last job: that is their stop.
    return handedBackAfter(Promise.race([done.finished, loops]), () => loops);
  }

  async work(queue: string, concurrency: number, handler: JobHandler): Promise<StopConsumer> {
    // `task.signal` is read only by handlers that use it: it is made on first read.
    const worker = this.queues.process(
      queue,
      (task) =>
        handler({
          id: task.id,
          payload: task.payload,
          get signal() {
            return task.signal;
          },
        }),
      { concurrency },
    );
    return () => worker.close();
  }

  async prepareWaits(): Promise<void> {
    // One shared reader per queue, started by the first waitFor.
  }

  async enqueueAndWait(
    queue: string,
    id: string,
    payload: Record<string, unknown>,
    timeoutMs: number,
  ): Promise<unknown> {
    await this.queues.enqueue(queue, id, { payload });
    const outcome = await this.queues.waitFor(queue, id, { timeoutMs });
    if (outcome.state !== 'completed') {
      throw new Error(`task '${id}' ended ${outcome.state}: ${outcome.error.message}`);
    }
    return outcome.result;
  }

  runFlows(f: FlowRun): Promise<StopConsumer> {
    const done = countdown(f.count);
    const options = { concurrency: f.concurrency };
    const workers = [
      ...f.childQueues.map((queue) =>
        this.queues.process(queue, async (task) => jobResult(task.id), options),
      ),
      this.queues.process(
        f.parentQueue,
        async (task) => {
          const results = await task.childResults();
          if (Object.keys(results).length !== f.children) {
            throw new Error(`flow '${task.id}' ran with ${Object.keys(results).length} results`);
          }
          done.tick(task.id);
          return jobResult(task.id);
        },
        options,
      ),
    ];
    const adding = addFlows(f.count, f.inFlight, (n) =>
      this.queues.enqueueFlow({
        queue: f.parentQueue,
        id: `flow-${n}`,
        payload: { n },
        children: Array.from({ length: f.children }, (_, i) => ({
          queue: f.childQueues[i % 2],
          id: `flow-${n}-${i}`,
          payload: { n, i },
        })),
      }),
    );
    return handedBackAfter(
      Promise.all([adding, done.finished]).then(() => undefined),
      async () => void (await Promise.all(workers.map((w) => w.close()))),
    );
  }

  cancel(queue: string, id: string): Promise<string> {
    return this.queues.cancel(queue, id);
  }

  async cancelCounts(queue: string): Promise<{ leased: number; cancelled: number }> {
    const { leased, cancelled } = await this.queues.stats(queue);
    return { leased, cancelled };
  }

  close(): Promise<void> {
    return this.app.close();
  }
}
