import { FlowProducer, type JobsOptions, Queue, QueueEvents, Worker } from 'bullmq';
import { Redis } from 'ioredis';
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

/** How a BullMQ row adds its jobs. */
export interface BullmqRowOptions {
  /**
   * Options of every job added. `{}`: BullMQ's defaults (completed jobs kept, no limit);
   * `{ removeOnComplete: true }`: its documented setting for throughput (no completed-job history).
   */
  readonly jobOptions: JobsOptions;
}

/**
 * BullMQ with default options (events on: its `events` stream, capped at 10,000 by default) and
 * the row's job options, on a connection we create (so on this process's ioredis; BullMQ requires
 * `maxRetriesPerRequest: null` for workers).
 */
export class BullmqAdapter implements QueueAdapter {
  private readonly queues = new Map<string, Queue>();
  private readonly readers = new Map<string, { events: QueueEvents; connection: Redis }>();

  private constructor(
    private readonly url: string,
    private readonly connection: Redis,
    private readonly jobOptions: JobsOptions,
  ) {}

  /** @param url the bench Redis */
  static async create(url: string, { jobOptions }: BullmqRowOptions): Promise<BullmqAdapter> {
    const connection = new Redis(url, { maxRetriesPerRequest: null });
    await connection.ping();
    return new BullmqAdapter(url, connection, jobOptions);
  }

  async enqueue(queue: string, id: string, payload: Record<string, unknown>): Promise<void> {
    await this.queue(queue).add('job', payload, this.jobOptions);
  }

  async fill(queue: string, count: number, groups?: number): Promise<void> {
    if (groups) throw new Error('groups are a BullMQ Pro feature (not in the open-source bullmq)');
    for (let start = 0; start < count; start += FILL_BATCH) {
      const jobs = Array.from({ length: Math.min(FILL_BATCH, count - start) }, (_, i) => ({
        name: 'job',
        data: { n: start + i },
        opts: this.jobOptions,
      }));
      await this.queue(queue).addBulk(jobs);
    }
  }

  drain(queue: string, count: number, concurrency: number, limiter?: Limit): Promise<StopConsumer> {
    const done = countdown(count);
    const worker = new Worker(
      queue,
      async (job) => {
        done.tick(job.id!);
        return jobResult(job.id!);
      },
      {
        connection: this.connection,
        concurrency,
        ...(limiter ? { limiter: { max: limiter.max, duration: limiter.durationMs } } : {}),
      },
    );
    worker.on('error', () => undefined);
    return handedBackAfter(done.finished, () => worker.close());
  }

  async work(queue: string, concurrency: number, handler: JobHandler): Promise<StopConsumer> {
    const worker = new Worker(queue, (job) => handler({ id: job.id!, payload: job.data }), {
      connection: this.connection,
      concurrency,
    });
    worker.on('error', () => undefined);
    await worker.waitUntilReady();
    return () => worker.close();
  }

  /** Flows with BullMQ's `FlowProducer`; the parent reads `job.getChildrenValues()`. */
  async runFlows(f: FlowRun): Promise<StopConsumer> {
    const done = countdown(f.count);
    const options = { connection: this.connection, concurrency: f.concurrency };
    const workers = [
      ...f.childQueues.map(
        (queue) => new Worker(queue, async (job) => jobResult(job.id!), options),
      ),
      new Worker(
        f.parentQueue,
        async (job) => {
          const results = await job.getChildrenValues();
          if (Object.keys(results).length !== f.children) {
            throw new Error(`flow '${job.id}' ran with ${Object.keys(results).length} results`);
          }
          done.tick(job.id!);
          return jobResult(job.id!);
        },
        options,
      ),
    ];
    for (const w of workers) w.on('error', () => undefined);
    const producer = new FlowProducer({ connection: this.connection });
    const adding = addFlows(f.count, f.inFlight, (n) =>
      producer.add({
        name: 'parent',
        queueName: f.parentQueue,
        data: { n },
        opts: this.jobOptions,
        children: Array.from({ length: f.children }, (_, i) => ({
          name: 'child',
          queueName: f.childQueues[i % 2],
          data: { n, i },
          opts: this.jobOptions,
        })),
      }),
    );
    return handedBackAfter(
      Promise.all([adding, done.finished]).then(() => undefined),
      async () => {
        await Promise.all(workers.map((w) => w.close()));
        await producer.close();
      },
    );
  }

  async prepareWaits(queue: string): Promise<void> {
    if (this.readers.has(queue)) return;
    // QueueEvents blocks on XREAD: a connection of its own.
    const connection = new Redis(this.url, { maxRetriesPerRequest: null });
    const events = new QueueEvents(queue, { connection });
    events.on('error', () => undefined);
    this.readers.set(queue, { events, connection });
    await events.waitUntilReady();
  }

  async enqueueAndWait(
    queue: string,
    id: string,
    payload: Record<string, unknown>,
    timeoutMs: number,
  ): Promise<unknown> {
    await this.prepareWaits(queue);
    const job = await this.queue(queue).add('job', payload, this.jobOptions);
    return job.waitUntilFinished(this.readers.get(queue)!.events, timeoutMs);
  }

  async close(): Promise<void> {
    await Promise.all([...this.readers.values()].map((r) => r.events.close()));
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    await Promise.all(
      [...this.readers.values()].map((r) => r.connection.quit().catch(() => undefined)),
    );
    await this.connection.quit();
  }

  private queue(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.connection });
      // Each `waitUntilFinished` listens to the queue's 'closing': no warning past 10 waits.
      queue.setMaxListeners(0);
      this.queues.set(name, queue);
    }
    return queue;
  }
}
