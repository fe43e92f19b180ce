/** Options of `QueueService.schedule`: exactly one of `cron` and `everyMs`. */
export interface QueueScheduleOptions {
  /**
   * A cron expression (5 fields, or 6 with seconds first), read by croner in `tz`.
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
  /** No tick before this time (a `Date` or ms since the epoch). */
  startAt?: Date | number;
  /** No tick after this time. */
  endAt?: Date | number;
  /** Enqueue at most this many tasks, then stop. */
  limit?: number;
}

/** A schedule stored in Redis, as `QueueService.schedules` reads it. */
export interface QueueSchedule {
  readonly queue: string;
  readonly id: string;
  readonly cron?: string;
  readonly everyMs?: number;
  readonly tz?: string;
  readonly payload?: unknown;
  readonly startAt?: number;
  readonly endAt?: number;
  readonly limit?: number;
  /** How many tasks it enqueued so far. */
  readonly count: number;
  /** The time of the last tick it enqueued (ms), if any. */
  readonly lastTick?: number;
  /** The time of its next tick (ms), or `undefined` when it is over (`endAt`, `limit`). */
  readonly nextTick?: number;
}
