import { Cron } from 'croner';
import { QueueError } from '../../errors/queue.error';
import { checkTaskName } from '../../options/resolve-options';
import { checkInt } from '../../options/validate';
import { checkOptionKeys, serializePayload } from '../queue-arguments';
import { MAX_DELAY_MS } from '../queue.constants';
import type { QueueScheduleOptions } from './schedule.interface';

/** @internal A validated schedule definition, as stored (payload as JSON text). */
export interface ScheduleSpec {
  cron?: string;
  everyMs?: number;
  tz?: string;
  payload?: string;
  startAt?: number;
  endAt?: number;
  limit?: number;
  name?: string;
}

const KEYS = ['cron', 'everyMs', 'tz', 'payload', 'startAt', 'endAt', 'limit', 'name'] as const;
/** Shortest `everyMs`: a schedule is not a busy loop. */
const MIN_EVERY_MS = 10;
/** Longest cron expression: six fields with long lists fit many times over. */
const MAX_CRON_LENGTH = 512;
/** Longest part of croner's own message put in an error (it may quote the whole input). */
const MAX_REASON_LENGTH = 120;
/** Latest time a JavaScript `Date` can hold, in ms. */
export const MAX_TIME_MS = 8_640_000_000_000_000;

function toTime(argument: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const ms = value instanceof Date ? value.getTime() : value;
  return checkInt(argument, ms, 0, MAX_TIME_MS, QueueError.invalid);
}

/**
 * @internal Validates the options of `QueueService.schedule`; throws `QueueError` naming the
 * option. The cron expression and time zone are checked by croner.
 */
export function checkScheduleOptions(options: unknown): ScheduleSpec {
  const o = checkOptionKeys(options, KEYS) as QueueScheduleOptions;
  if ((o.cron === undefined) === (o.everyMs === undefined)) {
    throw QueueError.invalid('options', options, 'exactly one of cron and everyMs');
  }
  const spec: ScheduleSpec = {};
  if (o.everyMs !== undefined) {
    spec.everyMs = checkInt('everyMs', o.everyMs, MIN_EVERY_MS, MAX_DELAY_MS, QueueError.invalid);
    if (o.tz !== undefined) throw QueueError.invalid('tz', o.tz, 'no time zone with everyMs');
  } else {
    if (typeof o.cron !== 'string' || o.cron.trim() === '') {
      throw QueueError.invalid('cron', o.cron, 'a cron expression');
    }
    if (o.cron.length > MAX_CRON_LENGTH) {
      throw QueueError.invalid(
        'cron',
        o.cron,
        `a cron expression of at most ${MAX_CRON_LENGTH} characters`,
      );
    }
    if (o.tz !== undefined) {
      try {
        if (typeof o.tz !== 'string') throw new Error('not a string');
        new Intl.DateTimeFormat('en-US', { timeZone: o.tz });
      } catch {
        throw QueueError.invalid('tz', o.tz, "an IANA time zone (e.g. 'Europe/Berlin')");
      }
    }
    // Croner also reads a 7th field (years), which the docs do not offer and `cron` (the package
    // of @nestjs/schedule) does not read; nicknames ('@daily') have one.
    const fields = o.cron.trim().split(/\s+/).length;
    if (!o.cron.trim().startsWith('@') && (fields < 5 || fields > 6)) {
      throw QueueError.invalid(
        'cron',
        o.cron,
        `a cron expression of 5 or 6 fields (not ${fields})`,
      );
    }
    let cron: Cron;
    try {
      cron = new Cron(o.cron, { paused: true, timezone: o.tz ?? 'UTC' });
    } catch (err) {
      const why = String((err as Error).message);
      const reason =
        why.length > MAX_REASON_LENGTH ? `${why.slice(0, MAX_REASON_LENGTH - 3)}...` : why;
      throw QueueError.invalid('cron', o.cron, `a cron expression (${reason})`);
    }
    // '0 0 31 2 *' (February 31st) reads, but never matches: the schedule would never fire.
    if (!cron.nextRun() && cron.previousRuns(1).length === 0) {
      throw QueueError.invalid('cron', o.cron, 'a cron expression that matches some time');
    }
    spec.cron = o.cron;
    if (o.tz !== undefined) spec.tz = o.tz;
  }
  const payload = serializePayload(o.payload);
  if (payload !== undefined) spec.payload = payload;
  const startAt = toTime('startAt', o.startAt);
  const endAt = toTime('endAt', o.endAt);
  if (startAt !== undefined && spec.cron !== undefined) {
    // Croner computes no tick after the year 3000 and throws near the largest Date: such a
    // startAt, once stored, left the schedule without a tick, or made every read of the queue's
    // schedules throw. Checked by computing its first tick, as every instance will.
    let first: Date | null = null;
    try {
      first = new Cron(spec.cron, { paused: true, timezone: spec.tz ?? 'UTC' }).nextRun(
        new Date(startAt - 1),
      );
    } catch {
      // No tick: refused below.
    }
    if (!first) {
      throw QueueError.invalid(
        'startAt',
        o.startAt,
        'a time croner computes a tick after (before the year 3000)',
      );
    }
  }
  if (startAt !== undefined) spec.startAt = startAt;
  if (endAt !== undefined) {
    if (startAt !== undefined && endAt < startAt) {
      throw QueueError.invalid('endAt', o.endAt, `a time not before startAt (${startAt})`);
    }
    spec.endAt = endAt;
  }
  if (o.limit !== undefined) spec.limit = checkInt('limit', o.limit, 1, 1e9, QueueError.invalid);
  // Last, and only when given: the stored JSON of schedules without one stays as it was (no new
  // revision for them).
  if (o.name !== undefined) spec.name = checkTaskName('name', o.name, QueueError.invalid);
  return spec;
}
