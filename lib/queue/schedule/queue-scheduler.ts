import type { Cluster } from 'ioredis';
import type { RedactingLogger } from '../../redaction/redacting-logger';
import { MAX_TIMER_MS } from '../../options/validate';
import type { RedisLockConnection } from '../../redis/redis-connection';
import { ThrottledWarning } from '../../redis/throttled-warning';
import { checkPayloadBytes, checkTaskId, parsePayload } from '../queue-arguments';
import { checkQueueName, queueRedisKeys } from '../queue-keys';
import { storedOwnOptions } from '../queue-replies';
import { MAX_QUEUE_NAME_BYTES } from '../queue.constants';
import { checkScheduleOptions, MAX_TIME_MS, type ScheduleSpec } from './schedule-options';
import { scheduleIndexKey, scheduleRedisKeys } from './schedule-keys';
import { QUEUE_SCHEDULE_SCRIPTS } from './schedule-scripts';
import { scheduleTicks, type ScheduleTicks } from './schedule-ticks';
import type { QueueSchedule, QueueScheduleOptions } from './schedule.interface';

/** How often every instance re-reads all schedules, in case a change announcement was lost. */
const RESYNC_MS = 60_000;
/** Wait before trying again after Redis failed a scheduler call, in ms (doubled per failed sync). */
const RETRY_MS = 1_000;

/** Digits of a tick time in ms at most. */
const MAX_TICK_DIGITS = String(MAX_TIME_MS).length;

/**
 * A schedule id: a task id short enough that its ticks' task ids (`<scheduleId>:<tick ms>`) stay
 * within the 512 bytes of task ids (495 bytes).
 */
function checkScheduleId(id: unknown): string {
  return checkTaskId(id, 'scheduleId', MAX_QUEUE_NAME_BYTES - 1 - MAX_TICK_DIGITS);
}

/** One schedule as read from Redis. */
interface StoredSchedule {
  id: string;
  spec: ScheduleSpec;
  rev: number;
  anchor: number;
  last?: number;
  count: number;
  ticks: ScheduleTicks;
}

/**
 * Ticks that throw `err`: a definition croner cannot read on this instance (a time zone its ICU
 * does not know) is listed and warned about, while the queue's other schedules go on.
 */
function failingTicks(err: unknown): ScheduleTicks {
  const fail = (): never => {
    throw err;
  };
  return { after: fail, atOrBefore: fail };
}

/** A change announcement: `[queue, scheduleId]` as JSON, or (older versions) the queue name. */
function parseChange(message: string): [string, string] | undefined {
  try {
    const change: unknown = JSON.parse(message);
    if (
      Array.isArray(change) &&
      change.length === 2 &&
      change.every((v) => typeof v === 'string')
    ) {
      return change as [string, string];
    }
  } catch {
    // A queue name.
  }
  return undefined;
}

/**
 * @internal Queue schedules (`QueueService.schedule`, `unschedule`, `schedules`). Definitions
 * live in Redis, per queue; every instance with the module fires each schedule's next tick with
 * one timer per schedule (fire-schedule.lua enqueues the tick's task once, whoever fires it).
 * Instances learn of changes by a pub/sub announcement (re-read at most every `RESYNC_MS` in
 * case one is lost). After downtime, only the latest missed tick is enqueued, at once.
 */
export class QueueScheduler {
  private readonly timers = new Map<string, Map<string, NodeJS.Timeout>>();
  /** Per queue, per schedule: its ticks parsed from its revision `rev` (croner is costly). */
  private readonly parsed = new Map<string, Map<string, { rev: number; ticks: ScheduleTicks }>>();
  private readonly failures: ThrottledWarning;
  private readonly index: string;
  private unlisten?: () => void;
  private resync?: NodeJS.Timeout;
  /** The one retry of a failed sync, while pending. */
  private retry?: NodeJS.Timeout;
  private syncing = false;
  private failedSyncs = 0;
  private closed = false;

  constructor(
    private readonly connection: RedisLockConnection,
    logger: RedactingLogger,
  ) {
    this.failures = new ThrottledWarning(logger);
    this.index = scheduleIndexKey(connection.options.keyPrefix);
  }

  async schedule(
    queue: unknown,
    scheduleId: unknown,
    options: QueueScheduleOptions,
  ): Promise<QueueSchedule> {
    const name = checkQueueName(queue);
    const id = checkScheduleId(scheduleId);
    const spec = checkScheduleOptions(options);
    if (spec.payload !== undefined) {
      checkPayloadBytes(
        this.connection.options.queue,
        name,
        'payload',
        spec.payload,
        `schedule '${id}'`,
      );
    }
    const k = scheduleRedisKeys(this.connection.options.keyPrefix, name);
    // Indexed first: a crash after it leaves a queue without schedules in the index (harmless),
    // never a schedule no instance knows of. Indexed again after: another instance's unschedule
    // of the queue's last schedule may have taken it out of the index in between (its re-check
    // ran before this schedule was stored).
    const indexed = () => this.connection.call('SADD', (c) => c.sadd(this.index, name));
    await indexed();
    const [changed, , now, definition, state] = (await this.connection.run(
      QUEUE_SCHEDULE_SCRIPTS.upsert,
      [k.definitions, k.state],
      [id, JSON.stringify(spec), spec.everyMs ?? '', spec.startAt ?? ''],
    )) as [number, number, number, string, string | null];
    await indexed();
    // The schedule as the upsert stored it (a schedule whose only tick is due at once, limit 1 or
    // a past startAt, may be fired and deleted by another instance right after): only it is
    // armed, the queue's other schedules are unchanged.
    const s = this.parse(name, id, definition, state);
    await this.place(name, id, s, Number(now));
    if (changed === 1) await this.announce(name, id);
    return this.describe(name, s, Number(now));
  }

  async unschedule(queue: unknown, scheduleId: unknown): Promise<boolean> {
    const name = checkQueueName(queue);
    const id = checkScheduleId(scheduleId);
    const k = scheduleRedisKeys(this.connection.options.keyPrefix, name);
    const [removed, left] = (await this.connection.run(
      QUEUE_SCHEDULE_SCRIPTS.remove,
      [k.definitions, k.state],
      [id],
    )) as [number, number];
    if (left === 0) await this.unindex(name);
    if (removed === 1) await this.announce(name, id);
    await this.refreshOne(name, id);
    return removed === 1;
  }

  async schedules(queue: unknown): Promise<QueueSchedule[]> {
    const name = checkQueueName(queue);
    const { list, now } = await this.read(name);
    return list.map((s) => this.describe(name, s, now));
  }

  /** Takes a queue whose last schedule went out of the index. */
  private async unindex(queue: string): Promise<void> {
    await this.connection.call('SREM', (c) => c.srem(this.index, queue));
    // A schedule added meanwhile keeps the queue in the index.
    const k = scheduleRedisKeys(this.connection.options.keyPrefix, queue);
    if ((await this.connection.call('HLEN', (c) => c.hlen(k.definitions))) > 0) {
      await this.connection.call('SADD', (c) => c.sadd(this.index, queue));
    }
  }

  /** Starts firing the schedules of every queue, and following changes. */
  async start(): Promise<void> {
    // Not while a retry is pending: it reads everything anyway.
    this.resync = setInterval(() => this.retry === undefined && void this.sync(), RESYNC_MS);
    this.resync.unref();
    const first = this.sync();
    // Redis out of reach (its commands wait for the connection, up to commandTimeoutMs): the
    // application starts at once, as documented, and the schedules are read once Redis answers
    // (sync retries by itself). Awaited otherwise, so that they fire as soon as it started.
    if (this.connection.client.status === 'ready') await first;
  }

  /** Stops every timer (schedules stay in Redis; other instances keep firing them). */
  close(): void {
    this.closed = true;
    clearInterval(this.resync);
    clearTimeout(this.retry);
    this.unlisten?.();
    for (const queue of this.timers.values())
      for (const timer of queue.values()) clearTimeout(timer);
    this.timers.clear();
    this.parsed.clear();
  }

  /** Listens for changes (once) and re-reads the schedules of every indexed queue. */
  private async sync(): Promise<void> {
    // One sync at a time, and one retry pending at most: each failed sync armed a retry of its
    // own, and the minute's sync started one more chain, so a failure that persisted added a
    // read of every queue per second each minute.
    if (this.closed || this.syncing) return;
    this.syncing = true;
    try {
      this.unlisten ??= await this.connection.hub.listen(this.index, (message) => {
        const change = parseChange(message);
        (change ? this.refreshOne(...change) : this.refresh(message)).catch((err: unknown) =>
          this.failed(
            change ? `re-reading schedule '${change[1]}' of ${change[0]}` : `re-reading ${message}`,
            err,
          ),
        );
      });
      const queues = await this.connection.call('SMEMBERS', (c) => c.smembers(this.index));
      await Promise.all(queues.map((queue) => this.refresh(queue)));
      this.failedSyncs = 0;
    } catch (err) {
      this.failed('reading the schedules', err);
      this.failedSyncs++;
      if (!this.closed && this.retry === undefined) {
        // Doubled per failure in a row, up to the resync period.
        const delay = Math.min(RETRY_MS * 2 ** Math.min(this.failedSyncs - 1, 16), RESYNC_MS);
        this.retry = setTimeout(() => {
          this.retry = undefined;
          void this.sync();
        }, delay);
        this.retry.unref();
      }
    } finally {
      this.syncing = false;
    }
  }

  /** Tells every instance that schedule `id` of `queue` changed (they re-read it alone). */
  private async announce(queue: string, id: string): Promise<void> {
    const message = JSON.stringify([queue, id]);
    await this.connection.call('PUBLISH', (c) =>
      this.connection.isCluster
        ? (c as Cluster).spublish(this.index, message)
        : c.publish(this.index, message),
    );
  }

  /**
   * A schedule from its definition as stored (`{ spec, rev, anchor }`, `spec` as JSON text) and
   * its state; its ticks parsed once per revision (croner is costly).
   */
  private parse(
    queue: string,
    id: string,
    definition: string,
    state: string | null | undefined,
  ): StoredSchedule {
    const {
      spec: specText,
      rev,
      anchor,
    } = JSON.parse(definition) as {
      spec: string;
      rev: number;
      anchor: number;
    };
    const spec = JSON.parse(specText) as ScheduleSpec;
    const [last, count] = (state ?? '').split(' ').map(Number);
    const cached = this.parsed.get(queue)?.get(id);
    let ticks = cached?.rev === rev ? cached.ticks : undefined;
    if (!ticks) {
      try {
        ticks = scheduleTicks({ ...spec, anchor });
      } catch (err) {
        ticks = failingTicks(err);
      }
    }
    return {
      id,
      spec,
      rev,
      anchor,
      last: state ? last : undefined,
      count: state ? count : 0,
      ticks,
    };
  }

  private async read(queue: string): Promise<{ list: StoredSchedule[]; now: number }> {
    const k = scheduleRedisKeys(this.connection.options.keyPrefix, queue);
    const [now, definitions, states] = (await this.connection.run(
      QUEUE_SCHEDULE_SCRIPTS.read,
      [k.definitions, k.state],
      [],
    )) as [number, string[], string[]];
    const state = new Map<string, string>();
    for (let i = 0; i < states.length; i += 2) state.set(states[i], states[i + 1]);
    const list: StoredSchedule[] = [];
    for (let i = 0; i < definitions.length; i += 2) {
      list.push(this.parse(queue, definitions[i], definitions[i + 1], state.get(definitions[i])));
    }
    return { list, now: Number(now) };
  }

  /** Re-reads a queue's schedules and re-arms their timers (at start, and once a minute). */
  private async refresh(queue: string): Promise<void> {
    const { list, now } = await this.read(queue);
    const offset = now - Date.now();
    const timers = this.timers.get(queue) ?? new Map<string, NodeJS.Timeout>();
    for (const timer of timers.values()) clearTimeout(timer);
    timers.clear();
    const parsed = new Map(list.map((s) => [s.id, { rev: s.rev, ticks: s.ticks }]));
    if (list.length > 0 && !this.closed) {
      this.timers.set(queue, timers);
      this.parsed.set(queue, parsed);
    } else {
      this.timers.delete(queue);
      this.parsed.delete(queue);
    }
    const ended = list.filter((s) => !this.armNext(queue, s, s.last ?? s.anchor - 1, now, offset));
    await Promise.all(ended.map((s) => this.ended(queue, s)));
  }

  /** Re-reads one schedule of a queue and re-arms its timer (a change was announced). */
  private async refreshOne(queue: string, id: string): Promise<void> {
    const k = scheduleRedisKeys(this.connection.options.keyPrefix, queue);
    const [now, definition, state] = (await this.connection.run(
      QUEUE_SCHEDULE_SCRIPTS.readOne,
      [k.definitions, k.state],
      [id],
    )) as [number, string | null, string | null];
    const s = definition ? this.parse(queue, id, definition, state) : undefined;
    await this.place(queue, id, s, Number(now));
  }

  /** Arms schedule `id` of `queue` as `s` (at Redis time `now`), or forgets it (`undefined`). */
  private async place(
    queue: string,
    id: string,
    s: StoredSchedule | undefined,
    now: number,
  ): Promise<void> {
    const timers = this.timers.get(queue);
    clearTimeout(timers?.get(id));
    timers?.delete(id);
    this.parsed.get(queue)?.delete(id);
    if (!s || this.closed) {
      if (timers?.size === 0) {
        this.timers.delete(queue);
        this.parsed.delete(queue);
      }
      return;
    }
    if (!timers) this.timers.set(queue, new Map());
    let parsed = this.parsed.get(queue);
    if (!parsed) this.parsed.set(queue, (parsed = new Map()));
    parsed.set(id, { rev: s.rev, ticks: s.ticks });
    if (!this.armNext(queue, s, s.last ?? s.anchor - 1, now, now - Date.now())) {
      await this.ended(queue, s);
    }
  }

  /**
   * Arms the tick of `s` after `after` (see `nextTick`); `false` when it has none left. A
   * schedule whose ticks croner cannot compute here is warned about and not armed.
   */
  private armNext(
    queue: string,
    s: StoredSchedule,
    after: number,
    now: number,
    offset: number,
  ): boolean {
    let tick: number | undefined;
    try {
      tick = this.nextTick(s, after, now);
    } catch (err) {
      this.failed(`computing the next tick of schedule '${s.id}' of queue '${queue}'`, err);
      return true;
    }
    if (tick === undefined) return false;
    this.arm(queue, s, tick, offset);
    return true;
  }

  /**
   * Deletes a schedule with no tick left (an `endAt` before its first tick, a `limit` lowered to
   * its count, a last tick skipped on a full queue): no script enqueues its last task, which is
   * where an ended schedule is deleted, so it stayed for ever. Only its revision `s.rev`.
   */
  private async ended(queue: string, s: StoredSchedule): Promise<void> {
    const k = scheduleRedisKeys(this.connection.options.keyPrefix, queue);
    try {
      const [removed, left] = (await this.connection.run(
        QUEUE_SCHEDULE_SCRIPTS.remove,
        [k.definitions, k.state],
        [s.id, s.rev],
      )) as [number, number];
      if (removed === 1) {
        this.timers.get(queue)?.delete(s.id);
        this.parsed.get(queue)?.delete(s.id);
      }
      if (removed === 1 && left === 0) await this.unindex(queue);
    } catch (err) {
      // Deleted by the next sync.
      this.failed(`deleting the ended schedule '${s.id}' of queue '${queue}'`, err);
    }
  }

  /**
   * The tick to fire after `after`, at Redis time `now`: the next one, or, when ticks were missed
   * (downtime), only the latest of them; `undefined` when the schedule is over.
   */
  private nextTick(s: StoredSchedule, after: number, now: number): number | undefined {
    if (s.spec.limit !== undefined && s.count >= s.spec.limit) return undefined;
    const next = s.ticks.after(after);
    if (next === undefined || next > now) return next;
    return s.ticks.atOrBefore(now) ?? next;
  }

  /** Fires `tick` when the Redis clock (local clock + `offset`) reaches it, at least `minMs` on. */
  private arm(
    queue: string,
    s: StoredSchedule,
    tick: number | undefined,
    offset: number,
    minMs = 0,
  ): void {
    const timers = this.timers.get(queue);
    if (tick === undefined || this.closed || !timers) return;
    clearTimeout(timers.get(s.id));
    const delay = Math.min(Math.max(tick - (Date.now() + offset), minMs), MAX_TIMER_MS);
    const timer = setTimeout(() => void this.fire(queue, s, tick), delay);
    timer.unref();
    timers.set(s.id, timer);
  }

  private async fire(queue: string, s: StoredSchedule, tick: number): Promise<void> {
    if (this.closed) return;
    const q = queueRedisKeys(this.connection.options.keyPrefix, queue);
    const k = scheduleRedisKeys(this.connection.options.keyPrefix, queue);
    let result: number;
    let now: number;
    let left: number | undefined;
    try {
      [result, now, left] = (await this.connection.run(
        QUEUE_SCHEDULE_SCRIPTS.fire,
        [
          k.definitions,
          k.state,
          q.due,
          q.leased,
          q.payload,
          q.attempts,
          q.dead,
          q.wake,
          q.info,
          q.errors,
          q.events,
          q.config,
          q.done,
          q.cancelled,
          q.expired,
          q.progress,
          q.opts,
          q.results,
          q.logs,
          q.expiries,
        ],
        [
          s.id,
          s.rev,
          tick,
          `${s.id}:${tick}`,
          s.spec.limit ?? '',
          s.spec.payload === undefined ? 0 : 1,
          s.spec.payload ?? '',
          this.connection.options.queue.eventsMaxLen,
          this.connection.options.queue.maxSize ?? 0,
          s.ticks.after(tick) === undefined ? 1 : 0,
          s.spec.name === undefined ? '' : storedOwnOptions({ name: s.spec.name }),
          s.spec.name ?? '',
        ],
      )) as [number, number, number?];
    } catch (err) {
      this.failed(`schedule '${s.id}' of queue '${queue}'`, err);
      return this.arm(queue, s, tick, 0, RETRY_MS);
    }
    const offset = now - Date.now();
    if (result === -2) return this.arm(queue, s, tick, offset);
    if (result === -1 || result === 3) {
      await this.refreshOne(queue, s.id).catch((err: unknown) =>
        this.failed(`re-reading schedule '${s.id}' of ${queue}`, err),
      );
      return;
    }
    if (result === 2) return;
    if (result === 5) {
      // Its last task: the script deleted the schedule.
      this.timers.get(queue)?.delete(s.id);
      if (left === 0) {
        await this.unindex(queue).catch((err: unknown) => this.failed(`unindexing ${queue}`, err));
      }
      return;
    }
    if (result === 4) {
      this.failures.warn(
        `queue '${queue}' is full (maxSize): the tick ${new Date(tick).toISOString()} of schedule '${s.id}' was skipped`,
      );
    }
    s.last = Math.max(s.last ?? tick, tick);
    if (result === 1) s.count++;
    if (!this.armNext(queue, s, tick, now, offset)) await this.ended(queue, s);
  }

  private describe(queue: string, s: StoredSchedule, now: number): QueueSchedule {
    const payload = parsePayload(s.spec.payload);
    let next: number | undefined;
    try {
      next = this.nextTick(s, s.last ?? s.anchor - 1, now);
    } catch {
      // Croner cannot compute its ticks here (warned about when armed): listed without one.
    }
    return {
      queue,
      id: s.id,
      ...(s.spec.cron !== undefined ? { cron: s.spec.cron } : {}),
      ...(s.spec.everyMs !== undefined ? { everyMs: s.spec.everyMs } : {}),
      ...(s.spec.tz !== undefined ? { tz: s.spec.tz } : {}),
      ...(payload !== undefined ? { payload } : {}),
      ...(s.spec.startAt !== undefined ? { startAt: s.spec.startAt } : {}),
      ...(s.spec.endAt !== undefined ? { endAt: s.spec.endAt } : {}),
      ...(s.spec.limit !== undefined ? { limit: s.spec.limit } : {}),
      ...(s.spec.name !== undefined ? { name: s.spec.name } : {}),
      count: s.count,
      ...(s.last !== undefined ? { lastTick: s.last } : {}),
      ...(next !== undefined ? { nextTick: next } : {}),
    };
  }

  private failed(what: string, err: unknown): void {
    this.failures.warn(`queue schedules: ${what} failed: ${(err as Error).message}`);
  }
}
