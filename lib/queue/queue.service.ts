import { randomBytes } from 'node:crypto';
import { BeforeApplicationShutdown, Injectable, Logger } from '@nestjs/common';
import { QueueError } from '../errors/queue.error';
import type { QueueDefaults } from '../interfaces/redis-lock-module-options.interface';
import { RedisLockConnection } from '../redis/redis-connection';
import type {
  ClaimOptions,
  EnqueueOptions,
  NackOptions,
  QueueHandler,
  QueueWorkerHandle,
  QueueWorkerOptions,
} from './interfaces/queue-options.interface';
import type {
  DeadTask,
  LeasedTask,
  NackResult,
  QueueStats,
  QueueTaskId,
  Task,
} from './interfaces/task.interface';
import {
  checkCount,
  checkDelay,
  checkIds,
  checkLeaseMs,
  checkLeasedTask,
  checkMaxAttempts,
  checkOptionKeys,
  checkScore,
  checkTaskId,
  parsePayload,
  serializePayload,
} from './queue-arguments';
import { checkQueueName, queueRedisKeys, type QueueRedisKeys } from './queue-keys';
import { QUEUE_SCRIPTS } from './queue-scripts';
import { resolveWorkerOptions } from './queue-worker-options';
import { QueueWorkerRunner, type QueueWorkerBackend } from './queue-worker';
import { MAX_QUEUE_BATCH } from './queue.constants';
import { QueueScheduler } from './schedule/queue-scheduler';
import type { QueueSchedule, QueueScheduleOptions } from './schedule/schedule.interface';

/** Expired leases one claim returns to the queue at most (the next claim takes the rest). */
const RECLAIM_PER_CLAIM = 1_000;

/**
 * A Redis task queue: one sorted set of due times per queue, every operation one Lua script, all
 * times from the Redis clock.
 *
 * - Seed-style (at-most-once): `enqueue`, `pop`, `top`, `dequeue`.
 * - Reliable (at-least-once): `claim` leases tasks; `ack` finishes, `nack` retries or dead-letters,
 *   `extendLease` keeps a lease alive; an expired lease returns the task by itself.
 * - Workers: `process(queue, handler)` or `@QueueWorker(queue)` on a provider method.
 *
 * Batches are capped at `MAX_QUEUE_BATCH` (1,000) ids / tasks per call.
 */
@Injectable()
export class QueueService implements QueueWorkerBackend, BeforeApplicationShutdown {
  private readonly logger = new Logger('QueueService');
  private readonly defaults: Required<QueueDefaults>;
  private readonly workers = new Set<QueueWorkerRunner>();
  private shuttingDown = false;

  constructor(private readonly connection: RedisLockConnection) {
    this.defaults = connection.options.queue;
  }

  /**
   * Adds `id` (or every id of an array, at most 1,000) to `queue`, due `delayMs` from now.
   * An id already queued (ready or delayed) or leased is not added twice: it is kept as it is, or
   * with `replace: true` (if not leased) gets the new due time and payload. A dead id is added
   * again as a new task.
   * @returns how many ids were newly added
   * @example
   * await queues.enqueue('orders', order.id, { payload: { sku, userId } });
   * await queues.enqueue('reminders', [1, 2, 3], { delayMs: 60_000 });
   */
  async enqueue(
    queue: string,
    id: QueueTaskId | readonly QueueTaskId[],
    options?: EnqueueOptions,
  ): Promise<number> {
    const k = this.keys(queue);
    const ids = checkIds(id);
    const o = checkOptionKeys(options, ['delayMs', 'payload', 'replace']);
    const delayMs = o.delayMs === undefined ? 0 : checkDelay('delayMs', o.delayMs);
    if (o.replace !== undefined && typeof o.replace !== 'boolean') {
      throw QueueError.invalid('replace', o.replace, 'true or false');
    }
    const payload = serializePayload(o.payload);
    const added = await this.connection.run(
      QUEUE_SCRIPTS.enqueue,
      [k.due, k.leased, k.payload, k.attempts, k.dead, k.wake],
      [delayMs, o.replace ? 1 : 0, payload === undefined ? 0 : 1, payload ?? '', ...ids],
    );
    return Number(added);
  }

  /**
   * Takes up to `count` (at most 1,000) ready tasks, lowest due time first, and removes them
   * with their payload: each task is delivered at most once, even if the caller then crashes.
   * @example
   * for (const task of await queues.pop('orders', 10)) await createOrder(task.payload);
   */
  async pop<P = unknown>(queue: string, count = 1): Promise<Task<P>[]> {
    const k = this.keys(queue);
    const n = checkCount(count);
    const reply = await this.connection.run(QUEUE_SCRIPTS.pop, [k.due, k.payload, k.attempts], [n]);
    return toTasks<P>(k.name, reply as (string | null)[]);
  }

  /** Reads up to `count` (at most 1,000) ready tasks, lowest due time first, without removing them. */
  async top<P = unknown>(queue: string, count = 1): Promise<Task<P>[]> {
    const k = this.keys(queue);
    const n = checkCount(count);
    const reply = await this.connection.run(QUEUE_SCRIPTS.top, [k.due, k.payload], [n]);
    return toTasks<P>(k.name, reply as (string | null)[]);
  }

  /**
   * Removes a queued (not leased) task only if its due time still equals `score` (as read with
   * `top`), i.e. nobody replaced it since. Resolves `false` when it is gone or has another score.
   * @example
   * const [task] = await queues.top('orders');
   * if (task && (await queues.dequeue('orders', task.id, task.score))) await handle(task);
   */
  async dequeue(queue: string, id: QueueTaskId, score: number): Promise<boolean> {
    const k = this.keys(queue);
    const taskId = checkTaskId(id);
    const s = checkScore(score);
    const removed = await this.connection.run(
      QUEUE_SCRIPTS.dequeue,
      [k.due, k.payload, k.attempts],
      [taskId, String(s)],
    );
    return removed === 1;
  }

  /**
   * Leases up to `count` (at most 1,000) ready tasks for `leaseMs`, lowest due time first: each
   * gets a fresh `leaseToken` and its `attempt` count goes up by one. Finish each with `ack`, or
   * `nack`; a lease that runs out returns the task to the queue (or to dead letter once it used
   * `maxAttempts`) at the next claim of anyone.
   * @example
   * const [task] = await queues.claim('orders', 1, { leaseMs: 10_000 });
   * if (task) { await handle(task); await queues.ack(task); }
   */
  async claim<P = unknown>(
    queue: string,
    count = 1,
    options?: ClaimOptions,
  ): Promise<LeasedTask<P>[]> {
    const k = this.keys(queue);
    const n = checkCount(count);
    const o = checkOptionKeys(options, ['leaseMs', 'maxAttempts']);
    const leaseMs =
      o.leaseMs === undefined ? this.defaults.leaseMs : checkLeaseMs('leaseMs', o.leaseMs);
    const maxAttempts =
      o.maxAttempts === undefined
        ? this.defaults.maxAttempts
        : checkMaxAttempts('maxAttempts', o.maxAttempts);
    return (await this.claimBatch<P>(k.name, n, { leaseMs, maxAttempts })).tasks;
  }

  /**
   * @internal `claim` with validated arguments, also telling in how many ms the next task is due
   * or the next lease expires (-1: neither).
   */
  async claimBatch<P = unknown>(
    queue: string,
    count: number,
    options: { leaseMs: number; maxAttempts: number },
  ): Promise<{ tasks: LeasedTask<P>[]; nextInMs: number }> {
    const k = this.keys(queue);
    const reply = (await this.connection.run(
      QUEUE_SCRIPTS.claim,
      [k.due, k.leased, k.payload, k.attempts, k.tokens, k.dead, k.wake],
      [
        count,
        options.leaseMs,
        options.maxAttempts,
        randomBytes(12).toString('hex'),
        RECLAIM_PER_CLAIM,
      ],
    )) as (string | number | null)[];
    const now = Number(reply[0]);
    const next = Number(reply[1]);
    const tasks: LeasedTask<P>[] = [];
    for (let i = 2; i < reply.length; i += 5) {
      const payload = parsePayload(reply[i + 4] as string | null);
      tasks.push({
        queue: k.name,
        id: String(reply[i]),
        score: Number(reply[i + 1]),
        attempt: Number(reply[i + 2]),
        leaseToken: String(reply[i + 3]),
        leaseExpiresAt: now + options.leaseMs,
        ...(payload === undefined ? {} : { payload: payload as P }),
      });
    }
    return { tasks, nextInMs: next < 0 ? -1 : next - now };
  }

  /**
   * Finishes a leased task: removes it with its payload. Resolves `false` (and changes nothing)
   * when the lease is stale: it expired and the task was returned or claimed by someone else.
   */
  async ack(task: LeasedTask): Promise<boolean> {
    const t = checkLeasedTask(task);
    const k = this.keys(t.queue);
    const acked = await this.connection.run(
      QUEUE_SCRIPTS.ack,
      [k.leased, k.tokens, k.payload, k.attempts],
      [t.id, t.leaseToken],
    );
    return acked === 1;
  }

  /**
   * Gives a leased task back after a failed attempt: due again `delayMs` from now (attempt count
   * and payload kept), or moved to the dead-letter set when its attempt count reached
   * `maxAttempts`.
   * @returns `'retried'`, `'dead'`, or `false` when the lease is stale (nothing changes)
   */
  async nack(task: LeasedTask, options?: NackOptions): Promise<NackResult> {
    const t = checkLeasedTask(task);
    const k = this.keys(t.queue);
    const o = checkOptionKeys(options, ['delayMs', 'maxAttempts']);
    const delayMs = o.delayMs === undefined ? 0 : checkDelay('delayMs', o.delayMs);
    const maxAttempts =
      o.maxAttempts === undefined
        ? this.defaults.maxAttempts
        : checkMaxAttempts('maxAttempts', o.maxAttempts);
    const result = await this.connection.run(
      QUEUE_SCRIPTS.nack,
      [k.due, k.leased, k.tokens, k.attempts, k.dead, k.wake],
      [t.id, t.leaseToken, delayMs, maxAttempts],
    );
    return result === 1 ? 'retried' : result === 2 ? 'dead' : false;
  }

  /**
   * Sets the lease of a task to expire `ms` from now. Resolves `false` (and changes nothing) when
   * the lease is stale.
   */
  async extendLease(task: LeasedTask, ms: number): Promise<boolean> {
    const t = checkLeasedTask(task);
    const k = this.keys(t.queue);
    const leaseMs = checkLeaseMs('ms', ms);
    const expiry = await this.connection.run(
      QUEUE_SCRIPTS.extendLease,
      [k.leased, k.tokens],
      [t.id, t.leaseToken, leaseMs],
    );
    return Number(expiry) > 0;
  }

  /**
   * Gives a leased task back unfinished, ready at once, without counting the attempt (what
   * workers do on shutdown). Resolves `false` (and changes nothing) when the lease is stale.
   */
  async release(task: LeasedTask): Promise<boolean> {
    const t = checkLeasedTask(task);
    const k = this.keys(t.queue);
    const released = await this.connection.run(
      QUEUE_SCRIPTS.release,
      [k.due, k.leased, k.tokens, k.attempts, k.wake],
      [t.id, t.leaseToken],
    );
    return released === 1;
  }

  /** Counts the tasks of `queue` by state, at one instant. */
  async stats(queue: string): Promise<QueueStats> {
    const k = this.keys(queue);
    const [ready, delayed, leased, dead] = (await this.connection.run(
      QUEUE_SCRIPTS.stats,
      [k.due, k.leased, k.dead],
      [],
    )) as number[];
    return { ready, delayed, leased, dead };
  }

  /** Reads up to `count` (at most 1,000) dead tasks of `queue`, oldest death first. */
  async deadLetters<P = unknown>(queue: string, count = 100): Promise<DeadTask<P>[]> {
    const k = this.keys(queue);
    const n = checkCount(count);
    const reply = (await this.connection.run(
      QUEUE_SCRIPTS.deadLetters,
      [k.dead, k.payload, k.attempts],
      [n],
    )) as (string | number | null)[];
    const dead: DeadTask<P>[] = [];
    for (let i = 0; i < reply.length; i += 4) {
      const payload = parsePayload(reply[i + 3] as string | null);
      dead.push({
        queue: k.name,
        id: String(reply[i]),
        diedAt: Number(reply[i + 1]),
        attempts: Number(reply[i + 2]),
        ...(payload === undefined ? {} : { payload: payload as P }),
      });
    }
    return dead;
  }

  /**
   * Moves dead tasks back to the queue, ready at once, with their attempt count reset: the given
   * ids (those that are dead), or else the 1,000 oldest. Call again until it resolves 0 to empty
   * a larger dead-letter set.
   * @returns how many tasks were moved
   */
  async requeueDead(queue: string, ids?: QueueTaskId | readonly QueueTaskId[]): Promise<number> {
    const k = this.keys(queue);
    const list = ids === undefined ? [] : checkIds(ids);
    const moved = await this.connection.run(
      QUEUE_SCRIPTS.requeueDead,
      [k.dead, k.due, k.attempts, k.wake],
      [MAX_QUEUE_BATCH, ...list],
    );
    return Number(moved);
  }

  /**
   * Starts a worker on `queue`: it claims up to `concurrency` tasks at a time, runs `handler` on
   * each (renewing the lease while it runs), acks when it resolves and retries with exponential
   * backoff when it throws, moving the task to dead letter after `maxAttempts`. Idle, it waits
   * for a wake-up from `enqueue` instead of polling. It stops on `handle.close()` and on
   * application shutdown (draining running handlers for up to `drainTimeoutMs`).
   * @example
   * const worker = queues.process('emails', async (task) => mailer.send(task.payload), { concurrency: 5 });
   * // later: await worker.close();
   */
  process<P = unknown>(
    queue: string,
    handler: QueueHandler<P>,
    options?: QueueWorkerOptions,
  ): QueueWorkerHandle {
    const k = this.keys(queue);
    if (typeof handler !== 'function') throw QueueError.invalid('handler', handler, 'a function');
    const o = resolveWorkerOptions(this.defaults, options);
    if (this.shuttingDown) {
      throw new QueueError(`queue '${k.name}': no new worker while the application shuts down`);
    }
    const worker: QueueWorkerRunner = new QueueWorkerRunner(
      k.name,
      k,
      handler as QueueHandler,
      o,
      this,
      this.connection,
      this.logger,
      () => this.workers.delete(worker),
    );
    this.workers.add(worker);
    worker.start();
    return { queue: k.name, close: () => worker.close() };
  }

  /** Nest lifecycle hook: stops every worker (no new claims, drain, give back unfinished tasks). */
  async beforeApplicationShutdown(): Promise<void> {
    this.shuttingDown = true;
    await Promise.all([...this.workers].map((w) => w.close()));
  }

  private keys(queue: unknown): QueueRedisKeys {
    return queueRedisKeys(this.connection.options.keyPrefix, checkQueueName(queue));
  }

  // Schedules: implemented in ./schedule (QueueScheduler); these methods only delegate.
  private scheduler?: QueueScheduler;

  private get schedulerOf(): QueueScheduler {
    return (this.scheduler ??= new QueueScheduler(this.connection, this.logger));
  }

  /**
   * Creates or changes the schedule `scheduleId` of `queue` (stored in Redis): every tick (a
   * `cron` expression in `tz`, or every `everyMs`) enqueues one task with id
   * `<scheduleId>:<tick time in ms>` and the schedule's `payload`, for the queue's workers, with
   * their leases and retries. However many instances run, each tick is enqueued once; every
   * instance with the module fires the ticks. Upserting the same definition again changes
   * nothing; a changed one takes effect from its next tick, and no tick is enqueued twice.
   * After downtime, only the latest missed tick is enqueued (at once).
   * @throws QueueError naming the offending option
   * @example
   * await queues.schedule('reports', 'daily', { cron: '0 6 * * *', tz: 'Europe/Berlin' });
   * await queues.schedule('sync', 'every-5s', { everyMs: 5_000, payload: { full: false } });
   */
  schedule(
    queue: string,
    scheduleId: string,
    options: QueueScheduleOptions,
  ): Promise<QueueSchedule> {
    return this.schedulerOf.schedule(queue, scheduleId, options);
  }

  /**
   * Removes a schedule: no more ticks (tasks it already enqueued stay). Resolves `false` when
   * there was none.
   */
  unschedule(queue: string, scheduleId: string): Promise<boolean> {
    return this.schedulerOf.unschedule(queue, scheduleId);
  }

  /** The schedules of `queue`, with their counts and next ticks. */
  schedules(queue: string): Promise<QueueSchedule[]> {
    return this.schedulerOf.schedules(queue);
  }

  /** @internal Starts firing the stored schedules (never fails: retried while Redis is away). */
  async onApplicationBootstrap(): Promise<void> {
    await this.schedulerOf.start();
  }

  /** @internal Stops firing schedules (before workers drain). */
  onModuleDestroy(): void {
    this.scheduler?.close();
  }
}

function toTasks<P>(queue: string, reply: (string | null)[]): Task<P>[] {
  const tasks: Task<P>[] = [];
  for (let i = 0; i < reply.length; i += 3) {
    const payload = parsePayload(reply[i + 2]);
    tasks.push({
      queue,
      id: String(reply[i]),
      score: Number(reply[i + 1]),
      ...(payload === undefined ? {} : { payload: payload as P }),
    });
  }
  return tasks;
}
