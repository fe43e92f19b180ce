/**
 * Options of `QueueService.schedule`: exactly one of `cron` and `everyMs`.
 * @example
 * { cron: '0 9 * * 1-5', tz: 'Europe/Berlin', payload: { report: 'daily' } }
 */
export interface QueueScheduleOptions {
  /**
   * A cron expression (5 fields, or 6 with seconds first), read by croner in `tz`; at most 512 characters.
   * @example '0 9 * * 1-5'
   */
  cron?: string;
  /** A fixed period in ms (at least 10): ticks at `startAt` (default: now + `everyMs`) + n × `everyMs`. */
  everyMs?: number;
  /**
   * IANA time zone of `cron` (DST included: a time that does not exist that day runs at the
   * first valid time after it; one that occurs twice runs once).
   * @default 'UTC'
   */
  tz?: string;
  /** JSON payload of every task the schedule enqueues. */
  payload?: unknown;
  /** No tick before this time (a `Date` or ms since the epoch; with `cron`, before the year 3000). */
  startAt?: Date | number;
  /** No tick after this time; the schedule is deleted once it enqueued its last tick. */
  endAt?: Date | number;
  /** Enqueue at most this many tasks, then stop: the schedule is deleted with its last task. */
  limit?: number;
  /**
   * The name of every task it enqueues (as `enqueue`'s `name`): a queue's named handlers run each
   * in the handler of that name.
   * @example 'daily'
   */
  name?: string;
}

/**
 * A schedule stored in Redis, as `QueueService.schedules` reads it.
 * @example
 * const [daily] = await queues.schedules('reports'); // { id: 'daily', cron: '0 6 * * *', count: 12, nextTick: … }
 */
export interface QueueSchedule {
  /** The queue its tasks go to. */
  readonly queue: string;
  /** The schedule's id; its tasks have ids `<id>:<tick time in ms>`. */
  readonly id: string;
  /** Its cron expression (or `everyMs`). */
  readonly cron?: string;
  /** Its period in ms (or `cron`). */
  readonly everyMs?: number;
  /** The time zone of `cron`, when not UTC. */
  readonly tz?: string;
  /** The payload of its tasks. */
  readonly payload?: unknown;
  /** No tick before this time (ms). */
  readonly startAt?: number;
  /** No tick after this time (ms). */
  readonly endAt?: number;
  /** Most tasks it enqueues. */
  readonly limit?: number;
  /** The name of its tasks. */
  readonly name?: string;
  /** How many tasks it enqueued so far. */
  readonly count: number;
  /** The time of the last tick it enqueued (ms), if any. */
  readonly lastTick?: number;
  /**
   * The time of its next tick (ms), or `undefined` when none is left (`endAt`). A schedule is
   * deleted once it enqueued its last task (`limit` reached, or its last tick before `endAt`), or
   * as soon as it is found with no tick left (`schedule()` then returns it without `nextTick`).
   */
  readonly nextTick?: number;
}
