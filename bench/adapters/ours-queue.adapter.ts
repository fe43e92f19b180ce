import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { QueueService, RedisLockModule } from '../../lib';
import { countdown, FILL_BATCH, type QueueAdapter } from './queue-adapter';

/** How the drain shape consumes our queue. */
export type OursDrainMode = 'leased' | 'pop';

/** Methods of `QueueService` the queue shapes use (the spec's API). */
const NEEDED = ['enqueue', 'pop', 'claim', 'ack', 'process'] as const;

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
 * nestjs-redis-lock's queue through its public API, default options. `leased` drains with a
 * worker (`QueueService.process`: claim, run, ack); `pop` with `concurrency` loops of
 * `pop(queue, 1)` (at-most-once, no lease).
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
   */
  static async create(url: string, mode: OursDrainMode): Promise<OursQueueAdapter> {
    const app = await NestFactory.createApplicationContext(
      RedisLockModule.forRoot({ redis: url }),
      {
        logger: false,
      },
    );
    return new OursQueueAdapter(app, app.get(QueueService), mode);
  }

  async enqueue(queue: string, id: string, payload: Record<string, unknown>): Promise<void> {
    await this.queues.enqueue(queue, id, { payload });
  }

  async fill(queue: string, count: number): Promise<void> {
    for (let start = 0; start < count; start += FILL_BATCH) {
      const ids = Array.from({ length: Math.min(FILL_BATCH, count - start) }, (_, i) => start + i);
      await Promise.all(ids.map((n) => this.queues.enqueue(queue, `job-${n}`, { payload: { n } })));
    }
  }

  async drain(queue: string, count: number, concurrency: number): Promise<void> {
    if (this.mode === 'pop') {
      let handled = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          for (;;) {
            const tasks = await this.queues.pop(queue, 1);
            if (tasks.length === 0) return;
            handled += tasks.length;
          }
        }),
      );
      if (handled !== count) throw new Error(`popped ${handled} of ${count} jobs`);
      return;
    }
    const done = countdown(count);
    const worker = this.queues.process(queue, async () => done.tick(), { concurrency });
    try {
      await done.finished;
    } finally {
      await worker.close();
    }
  }

  close(): Promise<void> {
    return this.app.close();
  }
}
