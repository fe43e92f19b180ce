import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { QueueFullError } from '../errors/queue-full.error';
import { RedisCommandError } from '../errors/redis-command.error';
import { QueueReplicationError } from '../errors/queue-replication.error';
import { connectedReplicas } from '../redis/replica-watch';
import type { ResolvedQueueDefaults, ResolvedWorkerOptions } from '../options/resolve-options';
import type { LuaScript } from '../redis/lua-script';
import type { RedisLockConnection } from '../redis/redis-connection';
import type {
  DeadTask,
  LeasedTask,
  QueueStats,
  QueueTaskInfo,
  QueueTaskState,
  Task,
} from './interfaces/task.interface';
import type { WorkerRateLimit } from './interfaces/queue-options.interface';
import { parsePayload } from './queue-arguments';
import { checkQueueName, queueRedisKeys, type QueueRedisKeys } from './queue-keys';
import { flowGroupKeys } from './flows/flow-keys';
import { FlowStore } from './flows/flow-store';
import { toLeasedTasks, toTaskInfos, toTasks } from './queue-replies';
import { QUEUE_SCRIPTS } from './queue-scripts';
import { EnqueueBatcher, type EnqueueSegment, type SegmentOutcome } from './enqueue-batcher';
import { MAX_QUEUE_BATCH, MAX_TASK_LOG_LINES } from './queue.constants';
import { QueueMetrics, metricsDayKey, METRICS_KEEP_MS } from './metrics/queue-metrics';
import { RedactingLogger } from '../redaction/redacting-logger';
import type { EnqueueArgs, ReplicaWait, SettleStep } from './interfaces/queue-store.interface';

export type { EnqueueArgs, ReplicaWait, SettleStep } from './interfaces/queue-store.interface';

/** Expired leases one claim returns to the queue at most (the next claim takes the rest). */
const RECLAIM_PER_CLAIM = 1_000;

/** Queues whose keys are cached at most (a cache, not a registry: it is cleared when full). */
const KEY_CACHE_SIZE = 1_000;

/** What a claim step settled each task as (claim.lua). */
export const SETTLED = { stale: 0, done: 1, dead: 2, cancelled: 3 } as const;

/**
 * The settle step of a task given back before its handler started (a claim answered late, a name
 * another instance runs, a worker closing): unattempted, and its start taken back from the queue's
 * limiter and its group's window (claim.lua), unlike the start of a `task.delay()`.
 */
export function unstartedRelease(task: LeasedTask, delayMs = 0): SettleStep {
  return { kind: 'release', task, delayMs, data: `u${task.fence}` };
}

/**
 * claim.lua's reply: now, next due, settles count, outbox written, expired, buried, the settles'
 * codes, then the leased tasks.
 */
type ClaimReply = (string | number | null)[];

/** What a claim step returns. */
export interface ClaimStepResult<P> {
  tasks: LeasedTask<P>[];
  /** In how many ms to look again (-1: when woken); see claim.lua. */
  nextInMs: number;
  /** Per settle, in order: a `SETTLED` value. */
  settled: number[];
  /**
   * Acks that too few replicas acknowledged (`waitForReplicas`) in a call that also leased
   * tasks: the leases are granted on the master, so the reply is kept for them to run.
   */
  shortfall?: QueueReplicationError;
}

/** How long a count of the master's replicas (`INFO replication`) is reused, in ms. */
const REPLICA_COUNT_MS = 5_000;

/**
 * The only user of the queue's Lua scripts: builds their KEYS (once per queue) and ARGV, runs
 * them on the module's connection and parses their replies. `QueueService` (the façade users
 * see), the workers and the scheduler go through it; nothing above it knows a key or a reply
 * layout. One script per operation; see the header of each in ./scripts. The flows' scripts
 * (add-flow, flow-apply) are run by its `flows` part (./flows/flow-store.ts).
 */
export class QueueStore {
  private readonly keyCache = new Map<string, QueueRedisKeys>();
  /** Merges plain enqueue calls of one tick (`enqueue`). */
  private readonly batcher = new EnqueueBatcher<{ k: QueueRedisKeys; a: EnqueueArgs }>(
    ({ k, a }, segments) => this.enqueueSegments(k, segments, a),
  );
  /** Flows: adding trees, outboxes, a parent's children (./flows/flow-store.ts). */
  readonly flows: FlowStore = new FlowStore(this);
  private readonly tokenPrefix = randomBytes(9).toString('base64url');
  private tokenCounter = 0;
  /** Module-wide queue options (event stream length, keep bounds for cancels). */
  readonly defaults: ResolvedQueueDefaults;
  /** Per-minute history of what ended (`QueueService.metrics`), flushed once a minute. */
  readonly metrics: QueueMetrics;

  constructor(
    readonly connection: RedisLockConnection,
    logger = new RedactingLogger('QueueService'),
  ) {
    this.defaults = connection.options.queue;
    this.metrics = new QueueMetrics(connection, (queue) => this.keys(queue), logger);
  }

  /** Keys of `queue` (a checked name; throws `QueueError` for a bad one). */
  keys(queue: unknown): QueueRedisKeys {
    // Only checked names are cached: a hit needs no second check.
    let keys = typeof queue === 'string' ? this.keyCache.get(queue) : undefined;
    if (!keys) {
      const name = checkQueueName(queue);
      if (this.keyCache.size >= KEY_CACHE_SIZE) this.keyCache.clear();
      keys = queueRedisKeys(this.connection.options.keyPrefix, name);
      this.keyCache.set(name, keys);
    }
    return keys;
  }

  private get eventsMaxLen(): number {
    return this.defaults.eventsMaxLen;
  }

  /** Per queue: the last write not sent yet that writes made after it wait for (`writeWaited`). */
  private readonly unsent = new Map<string, Promise<void>>();

  /** The last count of the master's connected replicas, and when it was taken. */
  private replicaCount?: { n: number | undefined; at: number };

  /**
   * Runs a write script; with `wait` (else the module's `queue.waitForReplicas`), first checks
   * that the master has that many replicas (refused unsent when not: `WAIT` would only time out),
   * then sends `WAIT` right behind the script, and throws `QueueReplicationError` when fewer
   * acknowledged. `FlowStore` writes through it too.
   */
  async write(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
    queue: string,
    operation: string,
    wait: ReplicaWait | false | undefined,
  ): Promise<unknown> {
    const { reply, shortfall } = await this.writeWaited(script, keys, args, queue, operation, wait);
    // The reply is dropped: the caller learns the write may not survive a failover.
    if (shortfall) throw shortfall;
    return reply;
  }

  /**
   * `write`, except that a write the master ran but too few replicas acknowledged answers its
   * reply with the `QueueReplicationError` beside it (`shortfall`), for a caller whose reply
   * carries more than the write (an ack's claim: the tasks it leased are this process's to run).
   * @param onLate called with the script's reply when it comes after its bound (`bounded`)
   */
  private async writeWaited(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
    queue: string,
    operation: string,
    wait: ReplicaWait | false | undefined,
    onLate?: (reply: unknown) => void,
  ): Promise<{ reply: unknown; shortfall?: QueueReplicationError }> {
    const w = wait === undefined ? this.defaults.waitForReplicas : wait;
    const before = this.unsent.get(queue);
    if (!w && !before) return { reply: await this.connection.run(script, keys, args, onLate) };
    // This write may wait before it is sent (for the one before it, for the replica count): the
    // writes of the queue made after it wait for it to be sent, so that calls reach Redis in the
    // order they were made (a plain enqueue made after one that counted replicas overtook it).
    let resolveSent!: () => void;
    const mine = new Promise<void>((resolve) => (resolveSent = resolve));
    const sent = () => {
      resolveSent();
      if (this.unsent.get(queue) === mine) this.unsent.delete(queue);
    };
    this.unsent.set(queue, mine);
    let pending: Promise<unknown>;
    let ranElsewhere = false;
    /** Replicas counted, too few, for an ack sent without WAIT. */
    let tooFew: number | undefined;
    try {
      if (before) await before;
      if (!w) {
        pending = this.connection.run(script, keys, args, onLate);
      } else {
        const have = await this.connectedReplicas();
        // Unknown (INFO refused): sent, and WAIT alone tells whether enough replicas acknowledged.
        if (have !== undefined && have < w.replicas) {
          // An ack is sent all the same (without a WAIT that could only time out): unsent, its
          // task would run again each lease and die "lease expired" after a promotion to a
          // master without replicas. The result is kept on the master; the shortfall is told.
          if (operation !== 'ack') {
            throw new QueueReplicationError(queue, operation, have, w.replicas, w.timeoutMs, false);
          }
          tooFew = have;
          pending = this.connection.run(script, keys, args, onLate);
        } else {
          // On the connection of replica-confirmed writes, not the shared one: the writes after
          // it go out once Redis ran it (or the call failed), not merely sent it.
          pending = this.connection.runThenWait(
            script,
            keys,
            args,
            w.replicas,
            w.timeoutMs,
            sent,
            onLate,
          );
          pending.catch(() => undefined).finally(sent);
          ranElsewhere = true;
        }
      }
    } finally {
      if (!ranElsewhere) sent();
    }
    if (!w) return { reply: await pending };
    if (tooFew !== undefined) {
      const reply = await pending;
      return {
        reply,
        shortfall: new QueueReplicationError(queue, operation, tooFew, w.replicas, 0, true),
      };
    }
    const [reply, acknowledged] = (await pending) as [unknown, number];
    if (acknowledged >= w.replicas) return { reply };
    this.replicaCount = undefined;
    return {
      reply,
      shortfall: new QueueReplicationError(
        queue,
        operation,
        acknowledged,
        w.replicas,
        w.timeoutMs,
        true,
      ),
    };
  }

  /**
   * Connected replicas of the master (Sentinel's watch, else `INFO replication`, reused 5 s);
   * undefined when they cannot be counted (an ACL user without `INFO`).
   */
  private async connectedReplicas(): Promise<number | undefined> {
    const watch = this.connection.replicaWatch;
    if (watch) return watch.counted();
    const now = Date.now();
    if (this.replicaCount && now - this.replicaCount.at < REPLICA_COUNT_MS) {
      return this.replicaCount.n;
    }
    let n: number | undefined;
    try {
      const info = await this.connection.call('INFO replication', (c) =>
        (c as Redis).info('replication'),
      );
      n = connectedReplicas(info);
    } catch (err) {
      // Refused (RedisCommandError): unknown. Unreachable: the write would fail too.
      if (!(err instanceof RedisCommandError)) throw err;
    }
    this.replicaCount = { n, at: now };
    return n;
  }

  /**
   * Adds `ids` (enqueue.lua). Plain calls (no replace, priority, group, deduplication or LIFO) to
   * one queue with the same delay, options and replica wait, made in the same tick, go to Redis as
   * one call with a segment each (`EnqueueBatcher`); each still gets its own outcome.
   * @throws QueueFullError when the call would take the queue past its `maxSize`
   */
  async enqueue(k: QueueRedisKeys, ids: readonly string[], a: EnqueueArgs): Promise<number> {
    const plain = !a.replace && a.priority === 0 && a.group === '' && !a.dedup;
    if (!plain || a.lifo) {
      this.batcher.sendNow(k.name);
      return this.enqueueCall(k, ids, a, plain);
    }
    const w = a.waitForReplicas;
    const outcome = await this.batcher.add(
      k.name,
      `${a.delayMs}\0${a.opts}\0${w ? `${w.replicas}/${w.timeoutMs}` : String(w)}`,
      { k, a },
      { ids, payload: a.payload },
    );
    if ('size' in outcome) throw new QueueFullError(k.name, outcome.size, outcome.maxSize);
    return outcome.added;
  }

  /** One enqueue.lua call for one caller (one that cannot be merged). */
  private async enqueueCall(
    k: QueueRedisKeys,
    ids: readonly string[],
    a: EnqueueArgs,
    plain: boolean,
  ): Promise<number> {
    const added = await this.write(
      QUEUE_SCRIPTS.enqueue,
      enqueueKeys(k, plain),
      [...this.enqueueHeader(a, a.payload === undefined ? 0 : 1, a.payload ?? ''), ...ids],
      k.name,
      'enqueue',
      a.waitForReplicas,
    );
    if (Array.isArray(added)) {
      throw new QueueFullError(k.name, Number(added[0]), Number(added[1]));
    }
    return Number(added);
  }

  /** One enqueue.lua call for one or more plain callers (`segments`, in order). */
  private async enqueueSegments(
    k: QueueRedisKeys,
    segments: readonly EnqueueSegment[],
    a: EnqueueArgs,
  ): Promise<SegmentOutcome[]> {
    const args = this.enqueueHeader(a, 2, '');
    for (const s of segments) {
      args.push(s.ids.length, s.payload === undefined ? 0 : 1, s.payload ?? '', ...s.ids);
    }
    const reply = (await this.write(
      QUEUE_SCRIPTS.enqueue,
      enqueueKeys(k, true),
      args,
      k.name,
      'enqueue',
      a.waitForReplicas,
    )) as (number | string)[];
    return segments.map((_, i) => {
      const [first, second] = [Number(reply[i * 2]), Number(reply[i * 2 + 1])];
      return second === -1 ? { added: first } : { size: first, maxSize: second };
    });
  }

  /** ARGV[1..12] of enqueue.lua. */
  private enqueueHeader(a: EnqueueArgs, hasPayload: number, payload: string): (string | number)[] {
    return [
      a.delayMs,
      a.replace ? 1 : 0,
      hasPayload,
      payload,
      a.priority,
      a.group,
      this.eventsMaxLen,
      a.opts,
      this.defaults.maxSize ?? 0,
      a.lifo ? 1 : 0,
      a.dedup?.id ?? '',
      a.dedup?.keepLastIfActive ? -1 : (a.dedup?.ttlMs ?? 0),
    ];
  }

  async pop<P>(k: QueueRedisKeys, count: number): Promise<Task<P>[]> {
    const reply = (await this.connection.run(QUEUE_SCRIPTS.pop, popKeys(k), [
      count,
      this.eventsMaxLen,
    ])) as (string | number | null)[];
    // A popped flow child counts as completed for its parent (pop.lua says why): one more
    // element when its outcome waits in the outbox.
    if (reply.length % 3 === 1) {
      reply.pop();
      await this.flows.applyOutboxes([k.name]);
    }
    return toTasks<P>(k.name, reply);
  }

  async top<P>(k: QueueRedisKeys, count: number): Promise<Task<P>[]> {
    const reply = await this.connection.run(QUEUE_SCRIPTS.top, [k.due, k.payload], [count]);
    return toTasks<P>(k.name, reply as (string | null)[]);
  }

  async dequeue(k: QueueRedisKeys, id: string, score: number): Promise<boolean> {
    const removed = await this.connection.run(QUEUE_SCRIPTS.dequeue, popKeys(k), [
      id,
      String(score),
      this.eventsMaxLen,
    ]);
    // 2: a flow child, whose outcome (completed, as pop's) waits in the outbox for its parent.
    if (removed === 2) await this.flows.applyOutboxes([k.name]);
    return removed === 1 || removed === 2;
  }

  /**
   * One consumer step (claim.lua): settles `settles` (all of `queue`), then leases up to `count`
   * tasks with validated options.
   * @param onLate called with the raw reply when it comes after its bound (the call rejected
   *   already): the tasks it leased (`leasedBy`) run nowhere unless given back
   */
  async claim<P = unknown>(
    queue: string,
    count: number,
    options: ResolvedWorkerOptions,
    settles: readonly SettleStep[] = [],
    waitForReplicas?: ReplicaWait | false,
    onLate?: (reply: unknown) => void,
  ): Promise<ClaimStepResult<P>> {
    const k = this.keys(queue);
    const args: (string | number)[] = [
      count,
      options.leaseMs,
      options.maxAttempts,
      `${this.tokenPrefix}.${(this.tokenCounter++).toString(36)}`,
      RECLAIM_PER_CLAIM,
      options.groupConcurrency,
      options.limiter?.max ?? 0,
      options.limiter?.durationMs ?? 0,
      options.groupLimiter?.max ?? 0,
      options.groupLimiter?.durationMs ?? 0,
      options.keepDead.ageMs,
      options.keepDead.count,
      options.keepCompleted.count > 0 ? options.keepCompleted.ageMs : 0,
      options.keepCompleted.count,
      this.eventsMaxLen,
    ];
    for (const s of settles) {
      args.push(s.kind, s.task.id, s.task.leaseToken, s.task.attempt, s.delayMs ?? 0, s.data ?? '');
    }
    // Flow children: their parents' queues in this slot are advanced by the same script.
    const parents = this.flows.parentQueues(k.name, settles);
    const keys =
      parents.length === 0
        ? claimKeys(k)
        : [...claimKeys(k), ...parents.flatMap((q) => flowGroupKeys(this.keys(q)))];
    // Only acks are waited for (waitForReplicas): a lost claim or nack just runs a task again.
    const acks = settles.some((s) => s.kind === 'ack');
    const script = claimScript(settles);
    // A reply after the bound: the call rejected, but Redis settled and expired all the same. It
    // is counted whoever called (a manual ack, nack or release too), so the history matches Redis.
    const late = (r: unknown) => {
      if (!this.connection.closed) {
        const reply = r as ClaimReply;
        this.ended(k.name, settles, reply);
        if (reply[3] === 1) void this.flows.applyOutboxes([k.name, ...parents]);
      }
      onLate?.(r);
    };
    const { reply, shortfall } = (
      acks
        ? await this.writeWaited(script, keys, args, k.name, 'ack', waitForReplicas, late)
        : { reply: await this.connection.run(script, keys, args, late) }
    ) as { reply: ClaimReply; shortfall?: QueueReplicationError };
    // Counted and applied before a shortfall is thrown: the acks are on the master, and the
    // history counts what Redis holds.
    const settled = this.ended(k.name, settles, reply);
    if (reply[3] === 1) await this.flows.applyOutboxes([k.name, ...parents]);
    // Nothing leased: the caller learns that its acks may not survive a failover, as `write`'s.
    if (shortfall && count === 0) throw shortfall;
    const now = Number(reply[0]);
    const next = Number(reply[1]);
    return {
      tasks: toLeasedTasks<P>(k.name, reply, 6 + settled.length, options.leaseMs),
      nextInMs: next < 0 ? -1 : next - now,
      settled,
      ...(shortfall ? { shortfall } : {}),
    };
  }

  /**
   * The tasks a claim's raw reply leased (`claim`'s `onLate`: a reply that came too late).
   */
  leasedBy<P = unknown>(queue: string, reply: unknown, leaseMs: number): LeasedTask<P>[] {
    const r = reply as (string | number | null)[];
    return toLeasedTasks<P>(this.keys(queue).name, r, 6 + Number(r[2]), leaseMs);
  }

  /**
   * What a claim's reply says Redis ended, counted in the metrics (`countEnded`): returns the
   * settles' codes. The caller applies the flow outcomes the reply reports (`reply[3]`).
   */
  private ended(queue: string, settles: readonly SettleStep[], reply: ClaimReply): number[] {
    const settled = reply.slice(6, 6 + Number(reply[2])).map(Number);
    this.countEnded(queue, settles, settled, Number(reply[4]), Number(reply[5]));
    return settled;
  }

  /**
   * Counts in the queue's metrics what a claim ended: its settles as they `settled` (acks that
   * held: completed; nacks that retry: failed; dead; cancelled), and the tasks it expired and the
   * expired leases it buried.
   */
  private countEnded(
    queue: string,
    settles: readonly SettleStep[],
    settled: readonly number[],
    expired: number,
    stalledDead: number,
  ): void {
    const m = this.metrics;
    settles.forEach((s, i) => {
      const code = settled[i];
      if (code === SETTLED.dead) m.count(queue, 'dead');
      else if (code === SETTLED.cancelled) m.count(queue, 'cancelled');
      else if (code !== SETTLED.done) return;
      else if (s.kind === 'ack') m.count(queue, 'completed', 1, s.runMs);
      else if (s.kind === 'nack') m.count(queue, 'failed');
    });
    m.count(queue, 'expired', expired);
    m.count(queue, 'dead', stalledDead);
  }

  /**
   * Extends a lease to `ms` from now: `held` false when the lease is stale; `cancel` is the
   * reason of a cancel asked for meanwhile (JSON), if any.
   */
  async extendLease(task: LeasedTask, ms: number): Promise<{ held: boolean; cancel?: string }> {
    const k = this.keys(task.queue);
    const [expiry, cancel] = (await this.connection.run(
      QUEUE_SCRIPTS.extendLease,
      [k.leased, k.tokens, k.cancels],
      [task.id, task.leaseToken, ms],
    )) as [number, string | null];
    return { held: Number(expiry) > 0, ...(cancel ? { cancel } : {}) };
  }

  /** Stores a leased task's progress (and writes its event) or its new payload. */
  async updateTask(
    task: LeasedTask,
    what: 'progress' | 'payload',
    json: string,
    givenBack = false,
  ): Promise<boolean> {
    const k = this.keys(task.queue);
    const done = await this.connection.run(
      QUEUE_SCRIPTS.updateTask,
      [k.tokens, k.progress, k.payload, k.events, k.due, k.pending, k.info, k.prio, k.gtasks],
      [what, task.id, task.leaseToken, json, this.eventsMaxLen, givenBack ? '1' : '0'],
    );
    return done === 1;
  }

  /** Appends a line (JSON text) to a leased task's log (log.lua); false when the lease is stale. */
  async log(task: LeasedTask, json: string): Promise<boolean> {
    const k = this.keys(task.queue);
    const kept = await this.connection.run(
      QUEUE_SCRIPTS.log,
      [k.tokens, k.logs, k.events],
      [task.id, task.leaseToken, json, MAX_TASK_LOG_LINES, this.eventsMaxLen],
    );
    return Number(kept) > 0;
  }

  /** A task's log lines, oldest first ([] when it has none). */
  async logs(k: QueueRedisKeys, id: string): Promise<string[]> {
    const v = await this.connection.call('HGET (logs)', (c) => (c as Redis).hget(k.logs, id));
    return typeof v === 'string' ? v.split('\n').map((line) => JSON.parse(line) as string) : [];
  }

  async cancel(
    k: QueueRedisKeys,
    id: string,
    reason: string,
  ): Promise<'cancelled' | 'signalled' | 'finished' | 'not-found'> {
    const keep = this.defaults.keepDead;
    // Read first: the script may forget a cancelled parent's record (keepDead).
    const record = await this.flows.record(k, id);
    // A reply after the bound (the caller was told RedisUnavailableError): Redis cancelled all the
    // same, so it is counted and the task's flow told, as for a reply in time. A failure there is
    // left to the next claim of the queue (its outbox).
    const late = (outcome: unknown) => {
      if (this.connection.closed) return;
      if (outcome === 'cancelled') this.metrics.count(k.name, 'cancelled');
      if (outcome === 'cancelled' || outcome === 'signalled') {
        this.flows.ended(k, record, reason).catch(() => undefined);
      }
    };
    const outcome = (await this.connection.run(
      QUEUE_SCRIPTS.cancel,
      [
        ...inspectKeys(k),
        k.opts,
        k.cancels,
        k.events,
        k.cancelChannel,
        k.logs,
        k.dnext,
        ...flowKeys(k),
        k.expired,
        k.expiries,
      ],
      [id, reason, this.eventsMaxLen, keep.ageMs, keep.count, this.connection.isCluster ? 1 : 0],
      late,
    )) as 'cancelled' | 'signalled' | 'finished' | 'not-found';
    if (outcome === 'cancelled') this.metrics.count(k.name, 'cancelled');
    if (outcome === 'cancelled' || outcome === 'signalled') {
      await this.flows.ended(k, record, reason);
    }
    return outcome;
  }

  async stats(k: QueueRedisKeys): Promise<QueueStats> {
    const [ready, delayed, leased, dead, paused, completed, cancelled, waitingChildren, expired] =
      (await this.connection.run(
        QUEUE_SCRIPTS.stats,
        [
          k.due,
          k.leased,
          k.dead,
          k.pending,
          k.prio,
          k.gtasks,
          k.config,
          k.done,
          k.cancelled,
          k.wchildren,
          k.expired,
        ],
        [],
      )) as number[];
    return {
      ready,
      delayed,
      leased,
      dead,
      paused: paused === 1,
      completed,
      cancelled,
      waitingChildren,
      expired,
    };
  }

  /**
   * Ms until a task of the queue may start (Redis TIME), 0 when one may now: the longer of
   * `limitedUntil` and, when the stored limiter's window is full, the time a start fits again.
   */
  async rateLimitTtl(k: QueueRedisKeys): Promise<number> {
    const [[until, limiter], [s, us]] = await this.connection.call(
      'queue rate limit TTL',
      async (c) => {
        const results =
          (await c.pipeline().hmget(k.config, 'limitedUntil', 'limiter').time().exec()) ?? [];
        for (const [err] of results) if (err) throw err;
        return results.map(([, v]) => v) as [(string | null)[], [string, string]];
      },
    );
    const now = Number(s) * 1000 + Number(us) / 1000;
    let opens = until === null ? 0 : Number(until);
    const stored = parseLimiter(limiter);
    if (stored) {
      // The window is full while the max-th newest start is in it; it opens when that one leaves.
      // (ZRANGE from the end, not ZREVRANGE: one command fewer for a minimal ACL user to allow.)
      const edge = await this.connection.call('queue rate limit TTL', (c) =>
        c.zrange(k.limiter, -stored.max, -stored.max, 'WITHSCORES'),
      );
      if (edge.length === 2) opens = Math.max(opens, Number(edge[1]) + stored.durationMs);
    }
    return Math.max(0, Math.ceil(opens - now));
  }

  /** The queue limiter stored by `setRateLimit`, or null. */
  async storedLimiter(k: QueueRedisKeys): Promise<WorkerRateLimit | null> {
    return parseLimiter(
      await this.connection.call('queue rate limit', (c) => c.hget(k.config, 'limiter')),
    );
  }

  async setConfig(k: QueueRedisKeys, field: string, value: string): Promise<void> {
    await this.connection.run(
      QUEUE_SCRIPTS.config,
      [k.config, k.wake, k.events],
      [field, value, this.eventsMaxLen],
    );
  }

  /**
   * @param cutBytes a payload, result or progress longer than this many bytes comes as an
   *   `UnreadJson`, its size alone: Redis does not read it (0: every value whole)
   */
  async list<P>(
    k: QueueRedisKeys,
    state: QueueTaskState,
    offset: number,
    limit: number,
    cutBytes = 0,
  ): Promise<QueueTaskInfo<P>[]> {
    const reply = await this.connection.run(
      QUEUE_SCRIPTS.inspect,
      [...inspectKeys(k), k.wchildren, k.expired, k.opts],
      ['list', state, offset, limit, cutBytes],
    );
    return toTaskInfos<P>(k.name, reply as (string | number | null)[]);
  }

  async get<P>(k: QueueRedisKeys, id: string): Promise<QueueTaskInfo<P> | undefined> {
    const reply = await this.connection.run(
      QUEUE_SCRIPTS.inspect,
      [...inspectKeys(k), k.wchildren, k.expired, k.opts],
      ['get', id],
    );
    const info = toTaskInfos<P>(k.name, reply as (string | number | null)[])[0];
    if (!info) return undefined;
    const children = await this.flows.children(k, id, info.state === 'waiting-children');
    return children ? { ...info, children } : info;
  }

  async remove(k: QueueRedisKeys, id: string): Promise<boolean> {
    const record = await this.flows.record(k, id);
    const removed = await this.connection.run(
      QUEUE_SCRIPTS.remove,
      [...inspectKeys(k), k.opts, k.events, k.logs, k.dnext, ...flowKeys(k), k.expired, k.expiries],
      [id, this.eventsMaxLen],
    );
    if (removed !== 1) return false;
    const reason = JSON.stringify({
      name: 'QueueError',
      message: `parent '${k.name}:${id}' removed`,
    });
    await this.flows.ended(k, record, reason);
    return true;
  }

  /**
   * Deletes up to `limit` tasks of finished `state` that finished at least `olderThanMs` ago
   * (clean.lua), 1,000 per script call.
   */
  async clean(
    k: QueueRedisKeys,
    state: 'completed' | 'dead' | 'cancelled' | 'expired',
    olderThanMs: number,
    limit: number,
  ): Promise<number> {
    const set = { completed: k.done, dead: k.dead, cancelled: k.cancelled, expired: k.expired }[
      state
    ];
    let deleted = 0;
    let offset = 0;
    while (deleted < limit) {
      const [n, next] = (await this.connection.run(
        QUEUE_SCRIPTS.clean,
        [set, k.events, ...taskHashes(k)],
        [state, olderThanMs, Math.min(MAX_QUEUE_BATCH, limit - deleted), offset, this.eventsMaxLen],
      )) as [number, number];
      deleted += n;
      if (next < 0) break;
      offset = next;
    }
    return deleted;
  }

  /**
   * Deletes every waiting task (`delayed`: delayed ones too), 1,000 per script call (drain.lua);
   * a drained flow child fails for its parent, as with `remove`.
   */
  async drain(k: QueueRedisKeys, delayed: boolean): Promise<number> {
    let deleted = 0;
    for (;;) {
      const [n, more, pushed] = (await this.connection.run(
        QUEUE_SCRIPTS.drain,
        [
          k.due,
          k.pending,
          k.prio,
          k.gtasks,
          k.ring,
          k.events,
          k.parents,
          k.outbox,
          k.expiries,
          ...taskHashes(k),
        ],
        [delayed ? 1 : 0, MAX_QUEUE_BATCH, this.eventsMaxLen],
      )) as [number, number, number];
      deleted += n;
      // Drained flow children failed ('removed', as remove's): their parents learn it now.
      if (pushed === 1) await this.flows.applyOutboxes([k.name]);
      if (more !== 1) return deleted;
    }
  }

  /**
   * Deletes every key of the queue (obliterate.lua); `{ done: false }` when tasks are leased and
   * `force` is false.
   */
  async obliterate(k: QueueRedisKeys, force: boolean): Promise<{ done: boolean; leased: number }> {
    const others = Object.entries(k)
      .filter(([part]) => !['name', 'cancelChannel', 'leased', 'events', 'metrics'].includes(part))
      .map(([, key]) => key);
    // The metrics' day keys (their history is the queue's too).
    const today = Math.floor(Date.now() / 86_400_000);
    for (let day = today - METRICS_KEEP_MS / 86_400_000 - 1; day <= today + 1; day++) {
      others.push(metricsDayKey(k, day));
    }
    // This instance's minutes not written yet would bring the history back.
    await this.metrics.forget(k.name);
    const [done, leased] = (await this.connection.run(
      QUEUE_SCRIPTS.obliterate,
      [k.leased, k.events, ...others],
      [force ? 1 : 0, this.eventsMaxLen],
    )) as [number, number];
    return { done: done === 1, leased };
  }

  async deadLetters<P>(k: QueueRedisKeys, count: number): Promise<DeadTask<P>[]> {
    const reply = (await this.connection.run(
      QUEUE_SCRIPTS.deadLetters,
      [k.dead, k.payload, k.attempts],
      [count],
    )) as (string | number | null)[];
    const dead: DeadTask<P>[] = [];
    for (let i = 0; i < reply.length; i += 4) {
      dead.push({
        queue: k.name,
        id: String(reply[i]),
        diedAt: Number(reply[i + 1]),
        attempts: Number(reply[i + 2]),
        payload: parsePayload(reply[i + 3] as string | null) as P,
      });
    }
    return dead;
  }

  async requeueDead(k: QueueRedisKeys, ids: readonly string[]): Promise<number> {
    const moved = await this.connection.run(
      QUEUE_SCRIPTS.requeueDead,
      [
        k.dead,
        k.due,
        k.attempts,
        k.wake,
        k.info,
        k.errors,
        k.prio,
        k.gtasks,
        k.ring,
        k.gpark,
        k.events,
        k.progress,
        k.opts,
        k.expiries,
      ],
      [MAX_QUEUE_BATCH, this.eventsMaxLen, ...ids],
    );
    return Number(moved);
  }
}

/** KEYS arrays of the hot scripts, built once per queue. */
const CLAIM_KEYS = new WeakMap<QueueRedisKeys, string[]>();
const ENQUEUE_KEYS = new WeakMap<QueueRedisKeys, string[]>();
const PLAIN_ENQUEUE_KEYS = new WeakMap<QueueRedisKeys, string[]>();

function cached(
  cache: WeakMap<QueueRedisKeys, string[]>,
  k: QueueRedisKeys,
  build: () => string[],
): string[] {
  let keys = cache.get(k);
  if (!keys) {
    keys = build();
    cache.set(k, keys);
  }
  return keys;
}

/**
 * The KEYS of enqueue.lua, in its order; `plain` (no replace, priority or group): only the first
 * 19, the only ones the script reads then.
 */
function enqueueKeys(k: QueueRedisKeys, plain: boolean): string[] {
  const all = cached(ENQUEUE_KEYS, k, () => [
    k.due,
    k.leased,
    k.payload,
    k.attempts,
    k.dead,
    k.wake,
    k.info,
    k.errors,
    k.done,
    k.events,
    k.progress,
    k.opts,
    k.results,
    k.cancelled,
    k.ties,
    k.config,
    k.logs,
    k.expired,
    k.expiries,
    k.pending,
    k.prio,
    k.gtasks,
    k.ring,
    k.gpark,
    k.seq,
    k.dedup,
    k.dnext,
    k.wchildren,
  ]);
  return plain ? cached(PLAIN_ENQUEUE_KEYS, k, () => all.slice(0, 19)) : all;
}

/**
 * claim.lua under the name of what the call does (its errors carry it): the settling of `settles`
 * when there are any (a release among them, else a nack or fail, else acks), else a claim.
 */
function claimScript(settles: readonly SettleStep[]): LuaScript {
  if (settles.length === 0) return QUEUE_SCRIPTS.claim;
  if (settles.some((s) => s.kind === 'release')) return QUEUE_SCRIPTS.release;
  return settles.some((s) => s.kind !== 'ack') ? QUEUE_SCRIPTS.nack : QUEUE_SCRIPTS.ack;
}

/** The KEYS of claim.lua, in its order. */
function claimKeys(k: QueueRedisKeys): string[] {
  return cached(CLAIM_KEYS, k, () => [
    k.due,
    k.leased,
    k.payload,
    k.attempts,
    k.tokens,
    k.dead,
    k.wake,
    k.info,
    k.errors,
    k.pending,
    k.prio,
    k.gtasks,
    k.ring,
    k.gactive,
    k.gpark,
    k.glimit,
    k.limiter,
    k.config,
    k.done,
    k.events,
    k.results,
    k.progress,
    k.opts,
    k.cancels,
    k.cancelled,
    k.fence,
    k.logs,
    k.dnext,
    k.dedup,
    k.parents,
    k.outbox,
    k.flow,
    k.expired,
    k.expiries,
  ]);
}

/**
 * The KEYS of pop.lua and dequeue.lua (flow links then deadlines last: a popped child ends for
 * its parent, a popped task's deadline entry goes).
 */
function popKeys(k: QueueRedisKeys): string[] {
  return [
    k.due,
    k.payload,
    k.attempts,
    k.info,
    k.errors,
    k.opts,
    k.events,
    k.logs,
    k.dnext,
    k.parents,
    k.outbox,
    k.flow,
    k.expiries,
  ];
}

/**
 * Every hash that holds a task's data, deleted with the task (clean.lua, drain.lua): its link to
 * a flow parent too (a 'wait' child keeps it until it is deleted).
 */
function taskHashes(k: QueueRedisKeys): string[] {
  return [
    k.payload,
    k.attempts,
    k.info,
    k.errors,
    k.results,
    k.progress,
    k.opts,
    k.logs,
    k.dnext,
    k.flow,
    k.parents,
  ];
}

/** The flow keys of cancel.lua and remove.lua, after their others (includes/flow.lua). */
function flowKeys(k: QueueRedisKeys): string[] {
  return [k.wchildren, k.cdone, k.flow, k.parents, k.outbox];
}

/**
 * The KEYS of inspect.lua (and the first of remove.lua and cancel.lua): every key that holds a
 * task or its data.
 */
function inspectKeys(k: QueueRedisKeys): string[] {
  return [
    k.due,
    k.leased,
    k.payload,
    k.attempts,
    k.dead,
    k.info,
    k.errors,
    k.pending,
    k.prio,
    k.gtasks,
    k.done,
    k.cancelled,
    k.results,
    k.progress,
  ];
}

/** The config field 'limiter' ('max:durationMs', see claim.lua) as a `WorkerRateLimit`. */
function parseLimiter(value: string | null): WorkerRateLimit | null {
  if (value === null) return null;
  const [max, durationMs] = value.split(':').map(Number);
  return { max, durationMs };
}
