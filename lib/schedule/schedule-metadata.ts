// The metadata `@nestjs/schedule` (5.x, 6.x, 12.x) puts on a `@Cron`, `@Interval` or `@Timeout`
// method, read by key so that this library never loads `@nestjs/schedule` itself.

/** Metadata keys of `@nestjs/schedule` (its `schedule.constants`). */
const SCHEDULER_TYPE = 'SCHEDULER_TYPE';
const SCHEDULE_CRON_OPTIONS = 'SCHEDULE_CRON_OPTIONS';
const SCHEDULE_INTERVAL_OPTIONS = 'SCHEDULE_INTERVAL_OPTIONS';
const SCHEDULE_TIMEOUT_OPTIONS = 'SCHEDULE_TIMEOUT_OPTIONS';

/** `SchedulerType` of `@nestjs/schedule`. */
const CRON = 1;
const TIMEOUT = 2;
const INTERVAL = 3;

/** @internal The schedule of one handler, as `@nestjs/schedule` runs it. */
export type HandlerSchedule =
  | {
      kind: 'cron';
      /** A cron expression, or a one-off `Date` (or Luxon `DateTime`, read by `toMillis`). */
      cronTime: unknown;
      timeZone?: string;
      utcOffset?: number;
    }
  | { kind: 'interval'; ms: number }
  | { kind: 'timeout'; ms: number };

/** @internal The schedule `@Cron`/`@Interval`/`@Timeout` put on `fn`, or `undefined`. */
export function handlerSchedule(fn: object): HandlerSchedule | undefined {
  const type: unknown = Reflect.getMetadata(SCHEDULER_TYPE, fn);
  if (type === CRON) {
    const o = (Reflect.getMetadata(SCHEDULE_CRON_OPTIONS, fn) ?? {}) as Record<string, unknown>;
    return {
      kind: 'cron',
      cronTime: o.cronTime,
      timeZone: typeof o.timeZone === 'string' ? o.timeZone : undefined,
      utcOffset: typeof o.utcOffset === 'number' ? o.utcOffset : undefined,
    };
  }
  if (type === INTERVAL || type === TIMEOUT) {
    const key = type === INTERVAL ? SCHEDULE_INTERVAL_OPTIONS : SCHEDULE_TIMEOUT_OPTIONS;
    const ms = Number((Reflect.getMetadata(key, fn) as { timeout?: unknown } | undefined)?.timeout);
    return { kind: type === INTERVAL ? 'interval' : 'timeout', ms };
  }
  return undefined;
}
