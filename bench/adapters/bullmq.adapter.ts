import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import {
  countdown,
  FILL_BATCH,
  handedBackAfter,
  type Limit,
  type QueueAdapter,
  type StopConsumer,
} from './queue-adapter';

/** Job options of every job: BullMQ's documented setting for throughput (no completed-job history). */
const JOB_OPTIONS = { removeOnComplete: true };

/**
 * BullMQ with default options and `removeOnComplete`, on a connection we create (so on this
 * process's ioredis; BullMQ requires `maxRetriesPerRequest: null` for workers).
 */
export class BullmqAdapter implements QueueAdapter {
  private readonly queues = new Map<string, Queue>();

  private constructor(private readonly connection: Redis) {}

  /** @param url the bench Redis */
  static async create(url: string): Promise<BullmqAdapter> {
    const connection = new Redis(url, { maxRetriesPerRequest: null });
    await connection.ping();
    return new BullmqAdapter(connection);
  }

  async enqueue(queue: string, id: string, payload: Record<string, unknown>): Promise<void> {
    await this.queue(queue).add('job', payload, JOB_OPTIONS);
  }

  async fill(queue: string, count: number, groups?: number): Promise<void> {
    if (groups) throw new Error('groups are a BullMQ Pro feature (not in the open-source bullmq)');
    for (let start = 0; start < count; start += FILL_BATCH) {
      const jobs = Array.from({ length: Math.min(FILL_BATCH, count - start) }, (_, i) => ({
        name: 'job',
        data: { n: start + i },
        opts: JOB_OPTIONS,
      }));
      await this.queue(queue).addBulk(jobs);
    }
  }

  drain(queue: string, count: number, concurrency: number, limiter?: Limit): Promise<StopConsumer> {
    const done = countdown(count);
    const worker = new Worker(queue, async (job) => done.tick(job.id!), {
      connection: this.connection,
      concurrency,
      ...(limiter ? { limiter: { max: limiter.max, duration: limiter.durationMs } } : {}),
    });
    worker.on('error', () => undefined);
    return handedBackAfter(done.finished, () => worker.close());
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    await this.connection.quit();
  }

  private queue(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.connection });
      this.queues.set(name, queue);
    }
    return queue;
  }
}
