import { Inject, Injectable } from '@nestjs/common';
import type {
  QueueName,
  QueueTaskInfo,
  QueueTaskState,
  TypedQueue,
} from '../queue/interfaces/task.interface';
import { checkQueueName, queueRedisKeys } from '../queue/queue-keys';
import { QueueService } from '../queue/queue.service';
import { RedisLockConnection } from '../redis/redis-connection';
import { MemoryRedis } from './memory/memory-redis';
import { MemoryRedisServer } from './memory/memory-redis-server';

/** Options of `RedisLockTesting.runUntilIdle`. */
export interface RunUntilIdleOptions {
  /**
   * The queues to run. @default every queue a worker of this application runs for
   * (`@QueueWorker` and `queues.process`)
   */
  queues?: readonly QueueName[];
  /**
   * Moves the clock, for fake timers: `(ms) => jest.advanceTimersByTimeAsync(ms)` (or vitest's
   * `vi.advanceTimersByTimeAsync`). Given, it is called with 1 (ms) while tasks are ready or leased (a worker's short waits are timers too), and with the time to the next due task while only delayed ones are left (backoffs, delays).
   * Not given (real timers), the helper waits 5 ms between looks and delayed tasks do not count.
   */
  advance?: (ms: number) => Promise<unknown> | unknown;
  /**
   * Whether delayed tasks (delays, retry backoffs) must run too before the queues count as idle.
   * @default true with `advance`, false without
   */
  delayed?: boolean;
  /** Looks at the queues at most this many times, then rejects naming what is left. @default 10000 */
  maxSteps?: number;
}

const PAGE = 1_000;

/**
 * Test helpers of `RedisLockTestingModule`: run the queues' workers until nothing is left to do,
 * see what was enqueued, reach the in-memory Redis, and empty it between tests.
 * @example
 * const testing = app.get(RedisLockTesting);
 * await orders.place(order);
 * await testing.runUntilIdle({ advance: (ms) => jest.advanceTimersByTimeAsync(ms) });
 */
@Injectable()
export class RedisLockTesting {
  constructor(
    @Inject(MemoryRedisServer) readonly server: MemoryRedisServer,
    @Inject(MemoryRedis) readonly client: MemoryRedis,
    @Inject(QueueService) private readonly queues: QueueService,
    @Inject(RedisLockConnection) private readonly connection: RedisLockConnection,
  ) {}

  /**
   * The tasks of `queue` in the given states, oldest first (by default the ones waiting to run:
   * ready and delayed), with payload, due time, attempts, priority and group.
   * @example expect((await testing.enqueued('emails')).map((t) => t.payload)).toEqual([{ to: 'a@b.c' }]);
   */
  async enqueued<P = unknown>(
    queue: QueueName<P>,
    states: readonly QueueTaskState[] = ['ready', 'delayed'],
  ): Promise<QueueTaskInfo<P>[]> {
    const tasks: QueueTaskInfo<P>[] = [];
    for (const state of states) {
      for (let offset = 0; ; offset += PAGE) {
        const page = await this.queues.list<P>(queue, state, { offset, limit: PAGE });
        tasks.push(...page);
        if (page.length < PAGE) break;
      }
    }
    return tasks;
  }

  /**
   * Lets the workers run until their queues are idle: no task ready, leased or waiting for its
   * children, and (with `advance`) none delayed either, the clock moved to each due time. Rejects
   * after `maxSteps` looks, naming the counts left (e.g. a handler that never returns).
   * @returns how many times the queues were looked at
   */
  async runUntilIdle(options: RunUntilIdleOptions = {}): Promise<number> {
    const { advance, maxSteps = 10_000 } = options;
    const delayed = options.delayed ?? advance !== undefined;
    const queues = options.queues ?? this.queues.workerQueues();
    // Fake timers (Jest's and vitest's come from @sinonjs/fake-timers, which marks its fakes with
    // `clock`): a real wait between looks would never end.
    if (!advance && (setTimeout as { clock?: unknown }).clock !== undefined) {
      throw new Error(
        'RedisLockTesting.runUntilIdle: timers are fake; pass advance, e.g. { advance: (ms) => jest.advanceTimersByTimeAsync(ms) }',
      );
    }
    for (let step = 1; step <= maxSteps; step++) {
      const stats = await Promise.all(queues.map((q) => this.queues.stats(q)));
      const busy = stats.some((s) => s.ready + s.leased + s.waitingChildren > 0);
      const waiting = delayed && stats.some((s) => s.delayed > 0);
      if (!busy && !waiting) return step;
      if (!advance) await new Promise((resolve) => setTimeout(resolve, 5));
      else if (busy) await advance(1);
      else await advance(Math.max(1, (await this.nextDue(queues)) - Date.now()));
      if (step === maxSteps) {
        const left = queues.map(
          (q, i) => `${typeof q === 'string' ? q : q.name}: ${JSON.stringify(stats[i])}`,
        );
        throw new Error(
          `RedisLockTesting.runUntilIdle: not idle after ${maxSteps} steps (${left.join('; ')})`,
        );
      }
    }
    return maxSteps;
  }

  /** Deletes every key of the in-memory Redis (e.g. in `afterEach`). */
  async flush(): Promise<void> {
    await this.client.call('FLUSHALL');
  }

  /**
   * The earliest due time of a delayed task of `queues`: the first of each zset that holds them
   * (plain tasks in `due`, after now; those with a priority or a group in `pending`). `list`'s
   * `delayed` gives the plain ones first, so its first task need not be the earliest.
   */
  private async nextDue(queues: readonly QueueName[]): Promise<number> {
    const now = Date.now();
    const firsts = await Promise.all(
      queues.map(async (q) => {
        const name = checkQueueName(typeof q === 'string' ? q : (q as TypedQueue<unknown>).name);
        const k = queueRedisKeys(this.connection.options.keyPrefix, name);
        const [plain, other] = await Promise.all([
          this.client.zrangebyscore(k.due, `(${now}`, '+inf', 'WITHSCORES', 'LIMIT', 0, 1),
          this.client.zrange(k.pending, 0, 0, 'WITHSCORES'),
        ]);
        return [plain[1], other[1]].filter((s) => s !== undefined).map(Number);
      }),
    );
    return Math.min(...firsts.flat());
  }
}
