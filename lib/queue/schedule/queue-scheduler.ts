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
/** Wait before trying again after Redis failed a scheduler call, in ms. */
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
 * @internal Queue schedules (`QueueService.schedule`, `unschedule`, `schedules`). Definitions
 * live in Redis, per queue; every instance with the module fires each schedule's next tick with
 * one timer per schedule (fire-schedule.lua enqueues the tick's task once, whoever fires it).
 * Instances learn of changes by a pub/sub announcement (re-read at most every `RESYNC_MS` in
 * case one is lost). After downtime, only the latest missed tick is enqueued, at once.
 */
export class QueueScheduler {
  private readonly timers = new Map<string, Map<string, NodeJS.Timeout>>();
  private readonly failures: ThrottledWarning;
  private readonly index: string;
  private unlisten?: () => void;
  private resync?: NodeJS.Timeout;
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
    const [changed] = (await this.connection.run(
      QUEUE_SCHEDULE_SCRIPTS.upsert,
      [k.definitions],
      [id, JSON.stringify(spec), spec.everyMs ?? '', spec.startAt ?? ''],
    )) as [number];
    await indexed();
    // Read before the others are told: a schedule whose only tick is due at once (limit 1, a
    // past startAt) may be fired and deleted by another instance right after.
    const schedules = await this.refresh(name);
    if (changed === 1) await this.announce(name);
    return schedules.find((s) => s.id === id)!;
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
    if (removed === 1) await this.announce(name);
    await this.refresh(name);
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
    if ((await this.read(queue)).list.length > 0) {
      await this.connection.call('SADD', (c) => c.sadd(this.index, queue));
    }
  }

  /** Starts firing the schedules of every queue, and following changes. */
  async start(): Promise<void> {
    this.resync = setInterval(() => void this.sync(), RESYNC_MS);
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
    this.unlisten?.();
    for (const queue of this.timers.values())
      for (const timer of queue.values()) clearTimeout(timer);
    this.timers.clear();
  }

  /** Listens for changes (once) and re-reads the schedules of every indexed queue. */
  private async sync(): Promise<void> {
    if (this.closed) return;
    try {
      this.unlisten ??= await this.connection.hub.listen(this.index, (queue) => {
        this.refresh(queue).catch((err: unknown) => this.failed(`re-reading ${queue}`, err));
      });
      const queues = await this.connection.call('SMEMBERS', (c) => c.smembers(this.index));
      await Promise.all(queues.map((queue) => this.refresh(queue)));
    } catch (err) {
      this.failed('reading the schedules', err);
      const retry = setTimeout(() => void this.sync(), RETRY_MS);
      retry.unref();
    }
  }

  private async announce(queue: string): Promise<void> {
    await this.connection.call('PUBLISH', (c) =>
      this.connection.isCluster
        ? (c as Cluster).spublish(this.index, queue)
        : c.publish(this.index, queue),
    );
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
      const id = definitions[i];
      const stored = JSON.parse(definitions[i + 1]) as {
        spec: string;
        rev: number;
        anchor: number;
      };
      const spec = JSON.parse(stored.spec) as ScheduleSpec;
      const [last, count] = (state.get(id) ?? '').split(' ').map(Number);
      list.push({
        id,
        spec,
        rev: stored.rev,
        anchor: stored.anchor,
        last: state.has(id) ? last : undefined,
        count: state.has(id) ? count : 0,
        ticks: scheduleTicks({ ...spec, anchor: stored.anchor }),
      });
    }
    return { list, now: Number(now) };
  }

  /** Re-reads a queue's schedules and re-arms their timers. */
  private async refresh(queue: string): Promise<QueueSchedule[]> {
    const { list, now } = await this.read(queue);
    const offset = now - Date.now();
    const timers = this.timers.get(queue) ?? new Map<string, NodeJS.Timeout>();
    for (const timer of timers.values()) clearTimeout(timer);
    timers.clear();
    if (list.length > 0 && !this.closed) this.timers.set(queue, timers);
    else this.timers.delete(queue);
    for (const s of list) this.arm(queue, s, this.nextTick(s, s.last ?? s.anchor - 1, now), offset);
    return list.map((s) => this.describe(queue, s, now));
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
      await this.refresh(queue).catch((err: unknown) => this.failed(`re-reading ${queue}`, err));
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
    this.arm(queue, s, this.nextTick(s, tick, now), offset);
  }

  private describe(queue: string, s: StoredSchedule, now: number): QueueSchedule {
    const payload = parsePayload(s.spec.payload);
    const next = this.nextTick(s, s.last ?? s.anchor - 1, now);
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
