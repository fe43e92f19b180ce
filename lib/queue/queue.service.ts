import { BeforeApplicationShutdown, Injectable } from '@nestjs/common';
import { RedactingLogger } from '../redaction/redacting-logger';
import { wellFormed } from '../errors/error-text';
import { QueueError } from '../errors/queue.error';
import { MAX_QUEUE_RATE_LIMIT_MS } from '../errors/queue-rate-limit.error';
import { RedisLockEvents } from '../events/redis-lock-events';
import type { ResolvedQueueDefaults, ResolvedWorkerOptions } from '../options/resolve-options';
import { checkMaxSize, checkRateLimit, checkWaitForReplicas } from '../options/resolve-options';
import type { WaitForReplicasOptions } from '../interfaces/lock-options.interface';
import { checkInt, utf8BytesOver } from '../options/validate';
import { PayloadTooLargeError } from '../errors/payload-too-large.error';
import { RedisLockConnection } from '../redis/redis-connection';
import { QueueTracing } from '../observability/tracing';
import type {
  BatchOptions,
  ClaimOptions,
  EnqueueOptions,
  QueueBatchHandler,
  NackOptions,
  QueueHandler,
  QueueWorkerHandle,
  QueueWorkerInfo,
  QueueMetricsOptions,
  QueueMetricsPoint,
  QueueWorkerOptions,
  WorkerRateLimit,
} from './interfaces/queue-options.interface';
import type {
  DeadTask,
  LeasedTask,
  NackResult,
  QueueStats,
  QueueTaskId,
  QueueTaskInfo,
  QueueName,
  QueueTaskState,
  Task,
  TypedQueue,
} from './interfaces/task.interface';
import {
  checkCount,
  checkDelay,
  checkIds,
  checkTime,
  checkLeaseMs,
  checkLeasedTask,
  checkMaxAttempts,
  checkOptionKeys,
  checkPage,
  checkScore,
  checkTaskId,
  serializeJson,
  storedPayload,
} from './queue-arguments';
import { checkQueueName, type QueueRedisKeys } from './queue-keys';
import { QueueStore, SETTLED, type ClaimStepResult, type SettleStep } from './queue-store';
import { resolveWorkerOptions } from './queue-worker-options';
import { QueueWorkerRunner } from './worker/queue-worker';
import { WorkerRegistry } from './worker/worker-registry';
import { resolveEnqueueOptions } from './enqueue-options';
import { NamedWorkerLoops, type NamedHandlers } from './worker/named-handlers';
import { MAX_CONCURRENCY } from './queue.constants';
import { QueueScheduler } from './schedule/queue-scheduler';
import type { QueueSchedule, QueueScheduleOptions } from './schedule/schedule.interface';
import { encodeTaskError } from './task-errors';
import { QueueEventReaders } from './queue-events';
import type {
  QueueEvent,
  QueueEventsOptions,
  TaskOutcome,
  WaitForOptions,
} from './interfaces/queue-event.interface';
import type { Observable } from 'rxjs';
import type { EnqueueFlowOptions, FlowNode, FlowTaskIds } from './interfaces/flow.interface';
import { planFlow } from './flows/flow-tree';

/** Longest failure message a manual `nack` stores, in characters. */
const MAX_ERROR_CHARS = 1_000;

/** `EnqueueOptions` whose payload must be a `P` (optional only when `P` admits `undefined`). */
export type TypedEnqueueOptions<P> = Omit<EnqueueOptions, 'payload'> &
  (undefined extends P ? { payload?: P } : { payload: P });

/**
 * Declares a queue together with the payload type of its tasks, for `enqueue`, `claim`,
 * `process` and `@QueueWorker` to check.
 * @example
 * export const ORDERS = defineQueue<{ sku: string; userId: string }>('orders');
 * await queues.enqueue(ORDERS, id, { payload: { sku, userId } }); // payload required and checked
 * queues.process(ORDERS, async (task) => create(task.payload.sku)); // task.payload is typed
 */
export function defineQueue<P>(name: string): TypedQueue<P> {
  return { name: checkQueueName(name) };
}

/**
 * A Redis task queue: one sorted set of due times per queue (plus per-priority and per-group
 * structures), every operation one Lua script, all times from the Redis clock.
 *
 * - Seed-style (at-most-once): `enqueue`, `pop`, `top`, `dequeue`.
 * - Reliable (at-least-once): `claim` leases tasks; `ack` finishes, `nack` retries or dead-letters,
 *   `extendLease` keeps a lease alive; an expired lease returns the task by itself.
 * - Workers: `process(queue, handler)` or `@QueueWorker(queue)` on a provider method.
 * - Control and inspection: `pause`, `resume`, `setGlobalConcurrency`, `stats`, `list`, `get`,
 *   `remove`, `deadLetters`, `requeueDead`.
 *
 * Batches are capped at `MAX_QUEUE_BATCH` (1,000) ids / tasks per call.
 */
@Injectable()
export class QueueService implements BeforeApplicationShutdown {
  private readonly logger = new RedactingLogger('QueueService');
  private readonly defaults: ResolvedQueueDefaults;
  private readonly runners = new Set<QueueWorkerRunner>();
  /** Named handlers (`process(queue, handler, { name })`): one claim loop per queue. */
  private readonly namedLoops = new NamedWorkerLoops((handlers, given, onClosed) =>
    this.startRunner(
      handlers.queue,
      resolveWorkerOptions(this.defaults, given),
      unnamedHandler,
      handlers,
      onClosed,
    ),
  );
  private readonly tracing = new QueueTracing();
  /** @internal the owner of every Redis call of the queue */
  readonly store: QueueStore;
  /** Readers of the event streams (`events`, `waitFor`): one per queue read in this process. */
  private readonly readers: QueueEventReaders;
  /** This instance's workers in the registry of every instance's (`workers`). */
  private readonly registry: WorkerRegistry;
  private shuttingDown = false;
  private stopping?: Promise<void>;

  constructor(
    private readonly connection: RedisLockConnection,
    /** The module's in-process events; workers emit task outcomes on it. */
    private readonly emitter: RedisLockEvents = new RedisLockEvents(),
  ) {
    this.defaults = connection.options.queue;
    this.store = new QueueStore(connection, this.logger);
    this.readers = new QueueEventReaders(
      connection,
      (queue) => this.store.keys(queue),
      (queue, id) => this.store.get(this.store.keys(queue), id),
      this.logger,
    );
    this.registry = new WorkerRegistry(connection, (queue) => this.store.keys(queue), this.logger);
  }

  /**
   * The events of `queue` from every instance (one capped Redis Stream per queue, written by the
   * scripts that make the changes), as an rxjs Observable: from `'now'` (default), from the
   * `'start'` of the stream, or after an `eventId` (resume after a reconnect: nothing still in the
   * stream is missed, nothing comes twice). Subscribers in one process share one reader.
   * @throws RedisLockOptionsError for a malformed `from`; QueueError when events are off
   * @example
   * queues.events('orders').pipe(filter((e) => e.type === 'completed')).subscribe((e) => notify(e.taskId));
   */
  events(queue: QueueName, options?: QueueEventsOptions): Observable<QueueEvent> {
    return this.readers.events(this.keys(queue).name, options);
  }

  /**
   * Waits until task `id` of `queue` finished, from any instance: resolves at once for a task
   * already finished (and still kept), else on its `completed` / `dead` / `cancelled` event —
   * `{ state: 'completed', result }` or `{ state, error }`. Thousands of waiters in one process
   * share one reader (no polling per waiter).
   * @throws QueueWaitTimeoutError after `timeoutMs` (default 30 s); QueueError for a task that is
   *   unknown (never enqueued, or finished and no longer kept); RedisLockOptionsError for a bad
   *   `timeoutMs`
   * @example
   * const outcome = await queues.waitFor('orders', orderId, { timeoutMs: 10_000 });
   * if (outcome.state === 'completed') return outcome.result;
   */
  async waitFor<R = unknown>(
    queue: QueueName,
    id: QueueTaskId,
    options?: WaitForOptions,
  ): Promise<TaskOutcome<R>> {
    const outcome = await this.readers.waitFor(this.keys(queue).name, checkTaskId(id), options);
    return outcome as TaskOutcome<R>;
  }

  /**
   * Adds `id` (or every id of an array, at most 1,000) to `queue`, due `delayMs` from now.
   * An id already queued (ready or delayed) or leased is not added twice: it is kept as it is, or
   * with `replace: true` (if not leased) gets the new due time, priority, group and payload. A
   * dead id is added again as a new task; an id acked within its `keepCompleted` window is
   * refused.
   * @returns how many ids were newly added
   * @throws QueueError for a bad argument (an id over 512 bytes: the whole call);
   *   PayloadTooLargeError when the payload's JSON is past the queue's `maxPayloadBytes` (nothing
   *   is written); QueueFullError past `maxSize`
   * @example
   * await queues.enqueue('orders', order.id, { payload: { sku, userId } });
   * await queues.enqueue('reminders', [1, 2, 3], { delayMs: 60_000 });
   * await queues.enqueue('webhooks', event.id, { group: event.customerId, payload: event });
   */
  enqueue<P>(
    queue: TypedQueue<P>,
    id: QueueTaskId | readonly QueueTaskId[],
    ...options: undefined extends P ? [TypedEnqueueOptions<P>?] : [TypedEnqueueOptions<P>]
  ): Promise<number>;
  enqueue(
    queue: string,
    id: QueueTaskId | readonly QueueTaskId[],
    options?: EnqueueOptions,
  ): Promise<number>;
  async enqueue(
    queue: QueueName,
    id: QueueTaskId | readonly QueueTaskId[],
    options?: EnqueueOptions,
  ): Promise<number> {
    const k = this.keys(queue);
    const ids = checkIds(id);
    const args = resolveEnqueueOptions(this.defaults, k.name, ids, options);
    const json = args.payload;
    return this.tracing.enqueue(k.name, ids, (traceparent) => {
      // A replace without a payload keeps the stored one: no trace context is written over it.
      args.payload = storedPayload(
        json,
        args.replace && json === undefined ? undefined : traceparent,
      );
      return this.store.enqueue(k, ids, args);
    });
  }

  /**
   * Adds a flow: a tree of tasks over any queues and levels (at most `MAX_FLOW_NODES`, 1,000
   * nodes), where each parent waits in state `waiting-children` until every child completed, then
   * runs (its handler reads `task.childResults()`). The whole tree is checked before anything is
   * written. Where its queues share one slot (one Redis node, or one `{tag}` on Cluster) it is
   * written in one script, all or nothing; else parents first, level by level (docs/queue.md,
   * "Flows"). Each task counts against its own queue's `maxSize`.
   * @returns the tree's queues and ids, in its shape
   * @throws FlowError naming the node (malformed, duplicate `queue:id`, a cycle, too many nodes,
   *   or a task that exists already); PayloadTooLargeError naming the node when its payload is past
   *   its queue's `maxPayloadBytes`; QueueFullError when a queue would pass its `maxSize`
   * @example
   * await queues.enqueueFlow({ queue: 'orders', id: order.id, payload: order, children: [
   *   { queue: 'payments', id: `charge-${order.id}`, payload: { amount: order.total } },
   *   { queue: 'stock', id: `reserve-${order.id}`, payload: { sku: order.sku } },
   * ] });
   */
  async enqueueFlow(flow: FlowNode, options?: EnqueueFlowOptions): Promise<FlowTaskIds> {
    const plan = planFlow(flow, this.defaults);
    const o = checkOptionKeys(options, ['waitForReplicas']);
    const wait = checkWaitForReplicas('waitForReplicas', o.waitForReplicas, QueueError.invalid);
    return this.store.flows.add(plan, wait);
  }

  /**
   * Takes up to `count` (at most 1,000) ready tasks without priority or group, lowest due time
   * first, and removes them with their payload: each task is delivered at most once, even if the
   * caller then crashes.
   * @example
   * for (const task of await queues.pop('orders', 10)) await createOrder(task.payload);
   */
  async pop<P = unknown>(queue: QueueName<P>, count = 1): Promise<Task<P>[]> {
    return this.store.pop<P>(this.keys(queue), checkCount(count));
  }

  /**
   * Reads up to `count` (at most 1,000) ready tasks without priority or group, lowest due time
   * first, without removing them.
   */
  async top<P = unknown>(queue: QueueName<P>, count = 1): Promise<Task<P>[]> {
    return this.store.top<P>(this.keys(queue), checkCount(count));
  }

  /**
   * Removes a queued (not leased) task only if its due time still equals `score` (as read with
   * `top`), i.e. nobody replaced it since. Resolves `false` when it is gone or has another score.
   * @example
   * const [task] = await queues.top('orders');
   * if (task && (await queues.dequeue('orders', task.id, task.score))) await handle(task);
   */
  async dequeue(queue: QueueName, id: QueueTaskId, score: number): Promise<boolean> {
    return this.store.dequeue(this.keys(queue), checkTaskId(id), checkScore(score));
  }

  /**
   * Leases up to `count` (at most 1,000) ready tasks for `leaseMs`: tasks with a negative
   * priority first, then ungrouped tasks (lowest due time first) taking turns with grouped ones
   * (groups round-robin), then positive priorities. Each gets a fresh `leaseToken` and its
   * `attempt` count goes up by one. Finish each with `ack`, or `nack`; a lease that runs out
   * returns the task to the queue (or to dead letter once it used `maxAttempts`) at the next claim
   * of anyone. Nothing is leased while the queue is paused or over its global concurrency.
   * @example
   * const [task] = await queues.claim('orders', 1, { leaseMs: 10_000 });
   * if (task) { await handle(task); await queues.ack(task); }
   */
  async claim<P = unknown>(
    queue: QueueName<P>,
    count = 1,
    options?: ClaimOptions,
  ): Promise<LeasedTask<P>[]> {
    const k = this.keys(queue);
    const n = checkCount(count);
    const step = resolveWorkerOptions(
      this.defaults,
      checkOptionKeys(options, CLAIM_OPTIONS),
      CLAIM_OPTIONS,
      QueueError.invalid,
    );
    return (await this.claimBatch<P>(k.name, n, step)).tasks;
  }

  /**
   * @internal One consumer step (claim.lua, through `QueueStore.claim`): settles the finished
   * tasks of `settles`, then leases up to `count` tasks with validated options.
   */
  claimBatch<P = unknown>(
    queue: string,
    count: number,
    options: ResolvedWorkerOptions,
    settles: readonly SettleStep[] = [],
  ): Promise<ClaimStepResult<P>> {
    return this.store.claim<P>(queue, count, options, settles);
  }

  /**
   * Finishes a leased task as `completed`, with `result` (any JSON value; kept with the task for
   * the module's `keepCompleted` window, else deleted with it). `waitForReplicas` (else the
   * module's `queue.waitForReplicas`) waits for replicas: fewer throw `QueueReplicationError`. Resolves `false` (and changes
   * nothing) when the lease is stale: it expired and the task was returned or claimed by someone
   * else, or the task was acked already with another result. The same ack again (same lease and
   * result, e.g. sent twice by ioredis after a failover) resolves `true` and changes nothing while
   * the completed task is kept (`keepCompleted`).
   * @throws PayloadTooLargeError when the result's JSON is past `queue.maxResultBytes` (the lease
   *   is kept: ack again)
   */
  async ack(
    task: LeasedTask,
    result?: unknown,
    options?: { waitForReplicas?: WaitForReplicasOptions | false },
  ): Promise<boolean> {
    const t = checkLeasedTask(task);
    const o = checkOptionKeys(options, ['waitForReplicas']);
    const wait = checkWaitForReplicas('waitForReplicas', o.waitForReplicas, QueueError.invalid);
    const data = result === undefined ? '' : serializeJson('result', result);
    const bytes = utf8BytesOver(data, this.defaults.maxResultBytes);
    if (bytes !== undefined) {
      const limit = this.defaults.maxResultBytes;
      throw new PayloadTooLargeError(t.queue, 'result', bytes, limit, 'queue.maxResultBytes');
    }
    const step: SettleStep = { kind: 'ack', task: t, data };
    const { settled } = await this.store.claim(t.queue, 0, this.defaults, [step], wait);
    return settled[0] === SETTLED.done;
  }

  /**
   * Gives a leased task back after a failed attempt: due again `delayMs` from now (attempt count
   * and payload kept), or moved to the dead-letter set when its attempt count reached
   * `maxAttempts`. A grouped task keeps its place at the head of its group, and the group waits
   * for it.
   * @returns `'retried'`, `'dead'`, or `false` when the lease is stale (nothing changes)
   */
  async nack(task: LeasedTask, options?: NackOptions): Promise<NackResult> {
    const t = checkLeasedTask(task);
    const o = checkOptionKeys(options, ['delayMs', 'maxAttempts', 'error']);
    const delayMs = o.delayMs === undefined ? 0 : checkDelay('delayMs', o.delayMs);
    const maxAttempts =
      o.maxAttempts === undefined
        ? this.defaults.maxAttempts
        : checkMaxAttempts('maxAttempts', o.maxAttempts);
    const data = o.error === undefined ? '' : encodeTaskError(o.error);
    const result = await this.settle({ kind: 'nack', task: t, delayMs, data }, maxAttempts);
    return result === SETTLED.done
      ? 'retried'
      : result === SETTLED.dead
        ? 'dead'
        : result === SETTLED.cancelled
          ? 'cancelled'
          : false;
  }

  /**
   * Sets the lease of a task to expire `ms` from now. Resolves `false` (and changes nothing) when
   * the lease is stale.
   */
  async extendLease(task: LeasedTask, ms: number): Promise<boolean> {
    const t = checkLeasedTask(task);
    return (await this.store.extendLease(t, checkLeaseMs('ms', ms))).held;
  }

  /**
   * Gives a leased task back unfinished, ready at once, without counting the attempt (what
   * workers do on shutdown). Resolves `false` (and changes nothing) when the lease is stale.
   */
  async release(task: LeasedTask): Promise<boolean> {
    return (await this.settle({ kind: 'release', task: checkLeasedTask(task) })) === SETTLED.done;
  }

  /** Counts the tasks of `queue` by state, at one instant, and tells whether it is paused. */
  async stats(queue: QueueName): Promise<QueueStats> {
    return this.store.stats(this.keys(queue));
  }

  /**
   * Stops every worker of `queue`, on every instance, from claiming: running tasks finish, and
   * `claim` returns nothing until `resume(queue)`. `stats()` shows `paused: true`.
   */
  async pause(queue: QueueName): Promise<void> {
    await this.setConfig(queue, 'paused', '1');
  }

  /**
   * The history of `queue`: one point per minute with activity from `from` to `to` (default: the
   * last hour), oldest first — tasks completed, failed (retried), dead, expired and cancelled on
   * every instance, and completed tasks' run-time p50/p95. Kept 14 days. Each instance writes its
   * counts once a minute (one script call per queue, not per task), so the current minute shows
   * after it ended; a crashed instance loses at most its last minute.
   * @throws QueueError for a bad range (`from` after `to`, not a time)
   * @example const lastDay = await queues.metrics('orders', { from: Date.now() - 86_400_000 });
   */
  async metrics(queue: QueueName, options?: QueueMetricsOptions): Promise<QueueMetricsPoint[]> {
    const name = this.keys(queue).name;
    const o = checkOptionKeys(options, ['from', 'to']);
    const to = o.to === undefined ? Date.now() : checkTime('to', o.to);
    const from = o.from === undefined ? to - 3_600_000 : checkTime('from', o.from);
    if (from > to) throw QueueError.invalid('from', o.from, `a time at or before 'to' (${to})`);
    return this.store.metrics.read(name, from, to);
  }

  /**
   * The workers of `queue` on every instance (as BullMQ's `getWorkers`): instance, host,
   * concurrency, tasks running, names, since when. Each instance writes its workers' entries every
   * 5 s (one script call per queue); an instance that died drops out 15 s after its last one.
   * (This instance's worker handles, which `workers` returned up to 0.1, are `localWorkers`.)
   * @example const busy = (await queues.workers('orders')).reduce((n, w) => n + w.running, 0);
   */
  async workers(queue: QueueName): Promise<QueueWorkerInfo[]> {
    return this.registry.list(this.keys(queue).name);
  }

  /**
   * The workers of this instance that run for `queue` (`@QueueWorker` ones and `process()` ones),
   * e.g. to change their concurrency at runtime; named handlers each by their own handle (the
   * one `process` returned: its concurrency is its name's).
   * @example for (const w of queues.localWorkers('orders')) w.setConcurrency(20);
   */
  localWorkers(queue: QueueName): QueueWorkerHandle[] {
    const name = this.keys(queue).name;
    const unnamed = [...this.runners].filter((w) => w.queue === name && !w.namedHandles);
    return [...unnamed, ...this.namedLoops.handles(name)];
  }

  /**
   * @internal how many workers of this instance run for `queue` (health checks, dashboard): as
   * `localWorkers` counts them, each named handler one (they share one claim loop)
   */
  workerCount(queue: string): number {
    return this.localWorkers(queue).length;
  }

  /** @internal the queues with a worker of this instance running (queue gauges, dashboard) */
  workerQueues(): string[] {
    return [...new Set([...this.runners].map((w) => w.queue))];
  }

  /** Lets the workers of `queue` claim again (and wakes one at once). */
  async resume(queue: QueueName): Promise<void> {
    await this.setConfig(queue, 'paused', '');
  }

  /**
   * Bounds `queue` to `n` tasks queued and running (stored in Redis, for every instance; wins over
   * the module's `queue.maxSize`); `null` falls back to the module's bound. Counted inside the
   * enqueue script, so concurrent producers never overshoot: past it `enqueue` throws
   * `QueueFullError` and adds nothing.
   * @throws RedisLockOptionsError unless `n` is an integer from 1 to 1,000,000,000 or `null`
   * @example await queues.setMaxSize('orders', 5_000);
   */
  async setMaxSize(queue: QueueName, n: number | null): Promise<void> {
    const k = this.keys(queue);
    await this.store.setConfig(k, 'maxSize', n === null ? '' : String(checkMaxSize('n', n)));
  }

  /**
   * At most `n` tasks of `queue` leased at once across every worker and instance (stored in
   * Redis); `null` removes the limit.
   * @example await queues.setGlobalConcurrency('exports', 5);
   */
  async setGlobalConcurrency(queue: QueueName, n: number | null): Promise<void> {
    const limit =
      n === null ? '' : String(checkInt('n', n, 1, MAX_CONCURRENCY, QueueError.invalid));
    await this.setConfig(queue, 'concurrency', limit);
  }

  /**
   * Rate-limits `queue` for `ms` on every instance: no worker takes a task of it until then
   * (running tasks go on; nothing is spent). The same as a handler throwing
   * `QueueRateLimitError(ms)`, but from anywhere; a longer limit already in force is kept. `0`
   * lifts it. BullMQ's `queue.rateLimit(ms)`.
   * @throws QueueError unless `ms` is an integer from 0 to 86,400,000 (a day)
   * @example await queues.rateLimit('payments', 30_000); // the provider asked for 30 s of quiet
   */
  async rateLimit(queue: QueueName, ms: number): Promise<void> {
    const limit = checkInt('ms', ms, 0, MAX_QUEUE_RATE_LIMIT_MS, QueueError.invalid);
    await this.setConfig(queue, 'limitedUntil', limit === 0 ? '' : String(limit));
  }

  /**
   * How long no task of `queue` may start, in ms on the Redis clock; `0` when one may now: the
   * longer of the pause of `rateLimit` / `QueueRateLimitError` and, when the limiter stored by
   * `setRateLimit` has its window full, the time until a start fits again. BullMQ's
   * `getRateLimitTtl`.
   */
  async rateLimitTtl(queue: QueueName): Promise<number> {
    return this.store.rateLimitTtl(this.keys(queue));
  }

  /**
   * Sets the queue limiter of every worker of `queue` on every instance at runtime: at most
   * `limit.max` tasks start in any sliding `limit.durationMs` window. Stored in the queue's
   * settings in Redis, it wins over the workers' own `limiter` and takes effect at their next
   * claim (an idle one is woken), without a restart; the starts already counted stay counted.
   * `null` removes it (each worker's own `limiter` applies again). BullMQ's
   * `queue.setGlobalRateLimit(max, duration)`.
   * @throws QueueError unless `limit` is `null` or `{ max, durationMs }` with `max` an integer from
   *   1 to 1,000,000 and `durationMs` one from 1 to 86,400,000 (a day), naming the bad field
   * @example await queues.setRateLimit('emails', { max: 100, durationMs: 1_000 });
   */
  async setRateLimit(queue: QueueName, limit: WorkerRateLimit | null): Promise<void> {
    const k = this.keys(queue);
    if (limit === null) return this.store.setConfig(k, 'limiter', '');
    const checked = checkRateLimit('limit', limit, QueueError.invalid);
    if (!checked) throw QueueError.invalid('limit', limit, '{ max, durationMs } or null');
    await this.store.setConfig(k, 'limiter', `${checked.max}:${checked.durationMs}`);
  }

  /**
   * The queue limiter stored by `setRateLimit` (what every worker of `queue` uses), or `null`
   * when none is (each worker's own `limiter` applies).
   */
  async getRateLimit(queue: QueueName): Promise<WorkerRateLimit | null> {
    return this.store.storedLimiter(this.keys(queue));
  }

  /**
   * Reads up to `limit` (default 100, at most 1,000) tasks of `queue` in `state`, from `offset`:
   * ready (negative priorities, ungrouped by due time, positive priorities, grouped by group),
   * delayed (by due time), leased (by lease expiry), completed (kept ones, oldest first), dead
   * and cancelled (oldest first).
   * @example const page = await queues.list('orders', 'dead', { offset: 0, limit: 50 });
   */
  async list<P = unknown>(
    queue: QueueName<P>,
    state: QueueTaskState,
    options?: { offset?: number; limit?: number },
  ): Promise<QueueTaskInfo<P>[]> {
    return this.readPage<P>(queue, state, options, 0);
  }

  /**
   * @internal `list` for the dashboard's task lists: a payload, result or progress longer than
   * `cutBytes` comes as an `UnreadJson`, its size alone (Redis does not read a page of large
   * values whole)
   */
  listPreviews(
    queue: string,
    state: QueueTaskState,
    options: { offset: number; limit: number },
    cutBytes: number,
  ): Promise<QueueTaskInfo[]> {
    return this.readPage(queue, state, options, cutBytes);
  }

  private async readPage<P>(
    queue: QueueName<P>,
    state: QueueTaskState,
    options: { offset?: number; limit?: number } | undefined,
    cutBytes: number,
  ): Promise<QueueTaskInfo<P>[]> {
    const k = this.keys(queue);
    if (!TASK_STATES.includes(state)) {
      throw QueueError.invalid('state', state, `one of '${TASK_STATES.join("', '")}'`);
    }
    const { offset, limit } = checkPage(options);
    return this.store.list<P>(k, state, offset, limit, cutBytes);
  }

  /**
   * Looks up one task of `queue`: its state, attempts, error, payload, enqueue time, priority,
   * group, result, progress and finish time; `undefined` when no such task is queued, leased, or
   * finished and still kept (completed, dead, cancelled).
   */
  async get<P = unknown>(
    queue: QueueName<P>,
    id: QueueTaskId,
  ): Promise<QueueTaskInfo<P> | undefined> {
    return this.store.get<P>(this.keys(queue), checkTaskId(id));
  }

  /**
   * Deletes a task that is queued (ready or delayed) or finished (completed, dead, cancelled), with
   * its payload. Resolves `false` when it is leased (a worker runs it: `cancel` it instead) or
   * unknown.
   */
  async remove(queue: QueueName, id: QueueTaskId): Promise<boolean> {
    return this.store.remove(this.keys(queue), checkTaskId(id));
  }

  /**
   * The log of task `id` (`task.log(line)` in its handler): its last 100 lines, oldest first; `[]`
   * when it has none or is unknown. The log goes when the task is deleted (trimmed, removed,
   * cleaned, popped).
   * @example const lines = await queues.logs('orders', orderId);
   */
  async logs(queue: QueueName, id: QueueTaskId): Promise<string[]> {
    return this.store.logs(this.keys(queue), checkTaskId(id));
  }

  /**
   * Deletes tasks of a finished state (`'completed'`, `'dead'`, `'cancelled'` or `'expired'`) that
   * finished at least `olderThanMs` ago (default 0: all), at most `limit` (default: no limit), with everything
   * stored about them; each writes a `removed` event. Runs 1,000 tasks per script call, so Redis
   * serves other clients between chunks.
   * @returns how many tasks were deleted
   * @example await queues.clean('orders', 'completed', { olderThanMs: 3_600_000 });
   */
  async clean(
    queue: QueueName,
    state: 'completed' | 'dead' | 'cancelled' | 'expired',
    options?: { olderThanMs?: number; limit?: number },
  ): Promise<number> {
    const k = this.keys(queue);
    if (!CLEAN_STATES.includes(state)) {
      throw QueueError.invalid('state', state, `one of '${CLEAN_STATES.join("', '")}'`);
    }
    const o = checkOptionKeys(options, ['olderThanMs', 'limit']);
    const olderThanMs = o.olderThanMs === undefined ? 0 : checkDelay('olderThanMs', o.olderThanMs);
    const limit =
      o.limit === undefined
        ? Number.MAX_SAFE_INTEGER
        : checkInt('limit', o.limit, 1, Number.MAX_SAFE_INTEGER, QueueError.invalid);
    return this.store.clean(k, state, olderThanMs, limit);
  }

  /**
   * Deletes every waiting task of `queue` (ready, including prioritized and grouped ones; with
   * `delayed: true`, delayed ones too), with its payload; leased and finished tasks stay. Each
   * writes a `removed` event; 1,000 tasks per script call.
   * @returns how many tasks were deleted
   * @example await queues.drain('orders', { delayed: true });
   */
  async drain(queue: QueueName, options?: { delayed?: boolean }): Promise<number> {
    const k = this.keys(queue);
    const o = checkOptionKeys(options, ['delayed']);
    if (o.delayed !== undefined && typeof o.delayed !== 'boolean') {
      throw QueueError.invalid('delayed', o.delayed, 'true or false');
    }
    return this.store.drain(k, o.delayed === true);
  }

  /**
   * Deletes the whole queue: its tasks in every state, their data, its settings (pause, global
   * concurrency, `maxSize`) and its event stream, in one script (UNLINK frees the memory in the
   * background), then writes one `obliterated` event. Schedules are kept.
   * @param options.force also while tasks are leased (their workers' acks then find no lease)
   * @throws QueueError while tasks are leased, unless `force`
   * @example await queues.obliterate('test-orders', { force: true });
   */
  async obliterate(queue: QueueName, options?: { force?: boolean }): Promise<void> {
    const k = this.keys(queue);
    const o = checkOptionKeys(options, ['force']);
    if (o.force !== undefined && typeof o.force !== 'boolean') {
      throw QueueError.invalid('force', o.force, 'true or false');
    }
    const { done, leased } = await this.store.obliterate(k, o.force === true);
    if (!done) {
      throw new QueueError(
        `queue '${k.name}' not obliterated: ${leased} task(s) are leased (running); pass { force: true } to delete it anyway`,
      );
    }
  }

  /**
   * Cancels a task on any instance: a waiting or delayed one ends `cancelled` at once; a running
   * one has its `task.signal` aborted (`TaskCancelledError`) wherever it runs (pub/sub; if the
   * message is lost, its next lease extension tells the worker) and ends `cancelled` when its
   * handler stops — unless the handler completes first. A cancelled task is never retried.
   * @returns `'cancelled'` (it was waiting), `'signalled'` (it is running), `'finished'`
   *   (completed, dead or cancelled already) or `'not-found'`
   * @example await queues.cancel('exports', exportId, { reason: 'user closed the page' });
   */
  async cancel(
    queue: QueueName,
    id: QueueTaskId,
    options?: { reason?: string },
  ): Promise<'cancelled' | 'signalled' | 'finished' | 'not-found'> {
    const k = this.keys(queue);
    const taskId = checkTaskId(id);
    const o = checkOptionKeys(options, ['reason']);
    if (o.reason !== undefined && typeof o.reason !== 'string') {
      throw QueueError.invalid('reason', o.reason, 'a string');
    }
    // Well-formed: half an emoji would make JSON that Redis's cjson cannot decode (a flow parent).
    const given = o.reason ? wellFormed(o.reason.slice(0, MAX_ERROR_CHARS)) : undefined;
    const message = `cancelled${given ? `: ${given}` : ''}`;
    // `reason`: what the running handler's TaskCancelledError and task.cancelled event carry.
    const reason = JSON.stringify({ name: 'TaskCancelledError', message, reason: given });
    return this.store.cancel(k, taskId, reason);
  }

  /** Reads up to `count` (at most 1,000) dead tasks of `queue`, oldest death first. */
  async deadLetters<P = unknown>(queue: QueueName<P>, count = 100): Promise<DeadTask<P>[]> {
    return this.store.deadLetters<P>(this.keys(queue), checkCount(count));
  }

  /**
   * Moves dead tasks back to the queue, ready at once, with their attempt count reset: the given
   * ids (those that are dead), or else the 1,000 oldest. Call again until it resolves 0 to empty
   * a larger dead-letter set.
   * @returns how many tasks were moved
   */
  async requeueDead(queue: QueueName, ids?: QueueTaskId | readonly QueueTaskId[]): Promise<number> {
    const k = this.keys(queue);
    return this.store.requeueDead(k, ids === undefined ? [] : checkIds(ids));
  }

  /**
   * Starts a worker on `queue`: it claims up to `concurrency` tasks at a time, runs `handler` on
   * each (renewing the lease while it runs), acks when it resolves (claiming the next task in the
   * same round trip) and retries with exponential backoff when it throws, moving the task to dead
   * letter after `maxAttempts`. Idle, it waits for a wake-up from `enqueue` instead of polling;
   * limited (rate limit, global concurrency, pause), it sleeps until the limit opens. It stops on
   * `handle.close()` and on application shutdown (draining running handlers for up to
   * `drainTimeoutMs`). Outcomes are emitted on `RedisLockEvents`.
   * @example
   * const worker = queues.process('emails', async (task: LeasedTask<Email>) => mailer.send(task.payload), { concurrency: 5 });
   * // later: await worker.close();
   */
  process<P = unknown>(
    queue: QueueName<P>,
    handler: QueueBatchHandler<P>,
    options: QueueWorkerOptions & { batch: BatchOptions },
  ): QueueWorkerHandle;
  process<P = unknown>(
    queue: QueueName<P>,
    handler: QueueHandler<P>,
    options?: QueueWorkerOptions,
  ): QueueWorkerHandle;
  process<P = unknown>(
    queue: QueueName<P>,
    handler: QueueHandler<P> | QueueBatchHandler<P>,
    options?: QueueWorkerOptions,
  ): QueueWorkerHandle {
    const k = this.keys(queue);
    if (typeof handler !== 'function') throw QueueError.invalid('handler', handler, 'a function');
    // `queue.workers[queue]` (configuration) wins over the options given here.
    const { names, ...configured } = this.defaults.workers.get(k.name) ?? {};
    // Options that are not an object are left as given, for resolveWorkerOptions to refuse.
    const given: QueueWorkerOptions | undefined =
      options !== undefined &&
      (options === null || typeof options !== 'object' || Array.isArray(options))
        ? options
        : { ...options, ...configured };
    const o = resolveWorkerOptions(this.defaults, given);
    if (this.shuttingDown) {
      throw new QueueError(`queue '${k.name}': no new worker while the application shuts down`);
    }
    if (o.name !== undefined) {
      const own = names?.[o.name];
      return this.namedLoops.add(
        k.name,
        o.name,
        handler as QueueHandler,
        given ?? {},
        own?.concurrency ?? o.concurrency,
        own?.timeoutMs ?? o.timeoutMs,
      );
    }
    return this.startRunner(k.name, o, handler as QueueHandler);
  }

  /** Starts a claim loop on `queue`: of one handler, or of the queue's `named` handlers. */
  private startRunner(
    queue: string,
    options: ResolvedWorkerOptions,
    handler: QueueHandler,
    named?: NamedHandlers,
    onClosed?: () => void,
  ): QueueWorkerRunner {
    const worker: QueueWorkerRunner = new QueueWorkerRunner(
      queue,
      this.keys(queue),
      handler,
      options,
      this.store,
      this.connection,
      this.logger,
      this.emitter,
      () => {
        this.runners.delete(worker);
        this.registry.remove(worker);
        onClosed?.();
      },
      named,
    );
    if (named) {
      named.handledElsewhere = (name) => this.registry.handles(queue, name);
      // Without its last name the loop is closing, and takes no new task: its entry goes now.
      // Left until the loop's drain ends, a heartbeat would write it with no names, which reads
      // as "runs every task", and other instances would pass on tasks that nobody runs.
      named.onNamesChanged = () => {
        if (named.size > 0) this.registry.touch(queue);
        else this.registry.remove(worker);
      };
    }
    this.runners.add(worker);
    worker.start();
    this.registry.add(worker);
    return worker;
  }

  /**
   * Nest lifecycle hook: stops every worker (no new claims, drain, give back unfinished tasks).
   * Calling it again returns the same promise: the module's locks, semaphores and waiting rooms
   * await it before they refuse callers (their handlers may still take locks while they drain).
   */
  beforeApplicationShutdown(): Promise<void> {
    return (this.stopping ??= this.stop());
  }

  private async stop(): Promise<void> {
    this.shuttingDown = true;
    // Named handlers added in this very tick: their loop would start after this snapshot.
    this.namedLoops.stop();
    await Promise.all([...this.runners].map((w) => w.close()));
    await this.registry.close();
    await this.store.metrics.close();
    this.readers.close();
  }

  private async settle(step: SettleStep, maxAttempts = this.defaults.maxAttempts): Promise<number> {
    const options: ResolvedWorkerOptions = { ...this.defaults, maxAttempts };
    return (await this.store.claim(step.task.queue, 0, options, [step])).settled[0];
  }

  private async setConfig(queue: QueueName, field: string, value: string): Promise<void> {
    await this.store.setConfig(this.keys(queue), field, value);
  }

  private keys(queue: unknown): QueueRedisKeys {
    return this.store.keys(
      typeof queue === 'object' && queue !== null ? (queue as TypedQueue<unknown>).name : queue,
    );
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
   * @throws QueueError naming the offending option (a `scheduleId` over 495 bytes: its ticks' task
   *   ids must fit in 512); PayloadTooLargeError when `payload` is past the queue's
   *   `maxPayloadBytes`
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

/** The handler of a named loop's runner: never called (each task runs in its name's handler). */
function unnamedHandler(): never {
  throw new QueueError('a named loop runs each task in the handler of its name');
}

/** The worker options `claim` takes (the rest concern a running worker). */
const CLAIM_OPTIONS = ['leaseMs', 'maxAttempts', 'groupConcurrency', 'limiter', 'groupLimiter'];
/** The states `list` reads. */
/** The states `clean` deletes from. */
const CLEAN_STATES: readonly string[] = ['completed', 'dead', 'cancelled', 'expired'];

const TASK_STATES: readonly QueueTaskState[] = [
  'ready',
  'delayed',
  'leased',
  'completed',
  'dead',
  'cancelled',
  'expired',
  'waiting-children',
];
