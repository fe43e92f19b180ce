import { Inject, Injectable } from '@nestjs/common';
import type {
  QueueName,
  QueueStats,
  QueueTaskInfo,
  QueueTaskState,
  TypedQueue,
} from '../queue/interfaces/task.interface';
import { RedisLockError } from '../errors/redis-lock.error';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { checkBoolean, checkInt, checkKnownKeys } from '../options/validate';
import { checkQueueNameOption } from '../options/queue-limits';
import { MAX_IDLE_MS } from '../queue/queue.constants';
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
   * `vi.advanceTimersByTimeAsync`). Given, it is called with 1 (ms) while tasks are leased (a
   * handler's and a worker's short waits are timers too) or just became ready. While only delayed
   * tasks are left, or ready ones stay unclaimed with none leased (a group parked after a retry
   * backoff, a queue limiter's full window or `rateLimit`, a worker in its idle wait), it moves
   * the clock to 10 s before the first of those ends, then 5 s (`MAX_IDLE_MS`, a worker's
   * longest idle wait) at a time. Not given (real timers), the helper waits 5 ms between looks
   * and delayed tasks do not count.
   */
  advance?: (ms: number) => Promise<unknown> | unknown;
  /**
   * Whether delayed tasks (delays, retry backoffs) must run too before the queues count as idle.
   * @default true with `advance`, false without
   */
  delayed?: boolean;
  /**
   * Looks at the queues at most this many times (an integer from 1), then rejects naming what is
   * left. @default 10000
   */
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
   * The tasks of `queue` in the given states (by default the ones waiting to run: ready and
   * delayed), with payload, due time, attempts, priority and group. Oldest first: by `enqueuedAt`
   * (its due time `time` when it has none), then by id; not in the order workers claim them.
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
    // `list` gives each state in its own order (ready ones in claim order: priorities and groups
    // first), so the states are merged here into one order a test can predict.
    const at = (t: QueueTaskInfo<P>) => t.enqueuedAt ?? t.time;
    return tasks.sort((a, b) => at(a) - at(b) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /**
   * Lets the workers run until their queues are idle: no task ready, leased or waiting for its
   * children, and (with `advance`) none delayed either, the clock moved to each due time. Rejects
   * with a `RedisLockError` after `maxSteps` looks, naming the counts left (e.g. a handler that
   * never returns).
   * @returns how many times the queues were looked at
   * @throws RedisLockOptionsError naming the option for an invalid option, or for no `advance`
   * under fake timers
   */
  async runUntilIdle(options: RunUntilIdleOptions = {}): Promise<number> {
    const { advance, delayed, queues, maxSteps } = checkRunUntilIdleOptions(options, () =>
      this.queues.workerQueues(),
    );
    let last = '';
    let waited = false;
    let stats: QueueStats[] = [];
    for (let step = 1; step <= maxSteps; step++) {
      stats = await Promise.all(queues.map((q) => this.queues.stats(q)));
      const busy = stats.some((s) => s.ready + s.leased + s.waitingChildren > 0);
      const waiting = delayed && stats.some((s) => s.delayed > 0);
      if (!busy && !waiting) return step;
      // Ready tasks that no worker claimed since the last look, none leased, wait for a time (a
      // parked group, a limiter's window) or for an idle worker's timer: 1 ms steps would reach
      // either only after thousands of looks. The first such look still moves 1 ms (a worker woken
      // by an enqueue claims at the current time).
      const looked = last;
      last = JSON.stringify(stats);
      const stalled = last === looked && stats.every((s) => s.leased === 0);
      if (!advance) await new Promise((resolve) => setTimeout(resolve, 5));
      else if (busy && !stalled) {
        waited = false;
        await advance(1);
      } else {
        // Nothing starts before `next`. Stalled, the clock first moves MAX_IDLE_MS at most, so
        // that every idle worker looks again; still stalled after that (or only delayed tasks
        // left), it moves to two idle waits before `next` at once, then MAX_IDLE_MS at a time: a
        // worker whose idle wait (at most MAX_IDLE_MS) began late after the long step is back in
        // step before `next`, and its wait ends on it.
        const next = (await this.nextStart(queues)) - Date.now();
        const far = Number.isFinite(next) && next > 2 * MAX_IDLE_MS && (!busy || waited);
        const ms = Math.max(1, far ? next - 2 * MAX_IDLE_MS : Math.min(MAX_IDLE_MS, next));
        waited = busy && ms >= MAX_IDLE_MS;
        await advance(ms);
      }
    }
    const left = queues.map(
      (q, i) => `${typeof q === 'string' ? q : q.name}: ${JSON.stringify(stats[i])}`,
    );
    throw new RedisLockError(
      `RedisLockTesting.runUntilIdle: not idle after ${maxSteps} steps (${left.join('; ')})`,
    );
  }

  /** Deletes every key of the in-memory Redis (e.g. in `afterEach`). */
  async flush(): Promise<void> {
    await this.client.call('FLUSHALL');
  }

  /**
   * The earliest time (epoch ms) a waiting task of `queues` may start: the first of each zset
   * that holds delayed tasks (plain ones in `due`, after now; those with a priority or a group in
   * `pending`), a parked group's next start (`gpark`, after now: a retry backoff, a group
   * limiter), and the end of the queue's rate limit (`rateLimitTtl`) or of a worker's own
   * limiter's window (the length only the worker knows: the window is empty when its key
   * expires). `list`'s `delayed` gives the plain ones first, so its first task need not be the
   * earliest. Infinity when none.
   */
  private async nextStart(queues: readonly QueueName[]): Promise<number> {
    const now = Date.now();
    const firsts = await Promise.all(
      queues.map(async (q) => {
        const name = checkQueueName(typeof q === 'string' ? q : (q as TypedQueue<unknown>).name);
        const k = queueRedisKeys(this.connection.options.keyPrefix, name);
        const after = (key: string) =>
          this.client.zrangebyscore(key, `(${now}`, '+inf', 'WITHSCORES', 'LIMIT', 0, 1);
        const [plain, other, parked, limited, window] = await Promise.all([
          after(k.due),
          this.client.zrange(k.pending, 0, 0, 'WITHSCORES'),
          after(k.gpark),
          this.queues.rateLimitTtl(name),
          this.client.pttl(k.limiter),
        ]);
        return [
          ...[plain[1], other[1], parked[1]].filter((s) => s !== undefined).map(Number),
          ...[limited, window].filter((ms) => ms > 0).map((ms) => now + ms),
        ];
      }),
    );
    return Math.min(...firsts.flat());
  }
}

/**
 * Validates `runUntilIdle`'s options and applies the defaults (`workerQueues` gives the default
 * queues). A `maxSteps` that is not a positive integer would end the loop before its first look
 * (0, negative, NaN) or past its last (a fraction) and report queues idle that are not.
 * @throws RedisLockOptionsError naming the option and its value
 */
function checkRunUntilIdleOptions(
  options: RunUntilIdleOptions,
  workerQueues: () => readonly QueueName[],
): {
  advance: RunUntilIdleOptions['advance'];
  delayed: boolean;
  queues: readonly QueueName[];
  maxSteps: number;
} {
  const o = checkKnownKeys('', options, [
    'queues',
    'advance',
    'delayed',
    'maxSteps',
  ]) as RunUntilIdleOptions;
  const { advance } = o;
  if (advance !== undefined && typeof advance !== 'function') {
    throw new RedisLockOptionsError(
      'advance',
      advance,
      'a function (ms) => … that moves the clock',
    );
  }
  // Fake timers (Jest's and vitest's come from @sinonjs/fake-timers, which marks its fakes with
  // `clock`): a real wait between looks would never end.
  if (!advance && (setTimeout as { clock?: unknown }).clock !== undefined) {
    throw new RedisLockOptionsError(
      'advance',
      advance,
      'a function under fake timers (a real wait between looks would never end), e.g. { advance: (ms) => jest.advanceTimersByTimeAsync(ms) }',
    );
  }
  const queues = o.queues ?? workerQueues();
  if (!Array.isArray(queues)) {
    throw new RedisLockOptionsError('queues', queues, 'an array of queue names or typed queues');
  }
  queues.forEach((q: unknown, i) =>
    checkQueueNameOption(
      `queues[${i}]`,
      typeof q === 'object' && q !== null ? (q as TypedQueue<unknown>).name : q,
    ),
  );
  return {
    advance,
    delayed: o.delayed === undefined ? advance !== undefined : checkBoolean('delayed', o.delayed),
    queues,
    maxSteps:
      o.maxSteps === undefined
        ? 10_000
        : checkInt('maxSteps', o.maxSteps, 1, Number.MAX_SAFE_INTEGER),
  };
}
