import { Cron } from 'croner';
import { RedisLockError } from '../errors/redis-lock.error';
import type { HandlerSchedule } from './schedule-metadata';

/** How early a cron handler may be called and still count for the tick it was scheduled for. */
export const CRON_EARLY_MS = 200;

/** The longest DST gap of any time zone (a local hour that does not exist), in ms. */
const MAX_DST_GAP_MS = 3_600_000;

/** Extra life of a job's claims beyond the clock skew and start lease, in ms. */
const KEEP_SLACK_MS = 5_000;

/** @internal Settings of `@OncePerTick` with defaults applied. */
export interface TickSettings {
  skewMs: number;
  startLeaseMs: number;
  windowMs: number;
}

/** @internal What claim-tick.lua needs to claim the current tick of one handler. */
export interface TickClaim {
  mode: 'at' | 'every' | 'once';
  /** The tick ('' for an interval: Redis picks the window). */
  tick: string;
  periodMs: number;
  earlyMs: number;
  keepMs: number;
  keepTicks: number;
}

/** @internal Identifies the tick a call of a scheduled handler belongs to. */
export type TickPlan = (nowMs: number) => TickClaim;

/**
 * @internal The tick plan of a handler with `schedule`:
 * - `@Cron(expression)`: the latest time the expression matches at or before the handler's call
 *   (plus `CRON_EARLY_MS`), computed by croner in the job's `timeZone`/`utcOffset` on the local
 *   clock — every instance fires on its own clock at the same scheduled time, so each names the
 *   same tick whatever its clock's offset, and the claim lives for twice `skewMs` more.
 * - `@Cron(date)`: that date.
 * - `@Interval(ms)`: a window of `ms` on the Redis clock (see claim-tick.lua).
 * - `@Timeout(ms)`: one claim per `windowMs`.
 * @throws RedisLockError when the schedule cannot be read (named after `where`)
 */
export function tickPlan(schedule: HandlerSchedule, s: TickSettings, where: string): TickPlan {
  const keepAt = 2 * s.skewMs + s.startLeaseMs + KEEP_SLACK_MS;
  if (schedule.kind === 'cron') {
    const at = (tick: number): TickClaim => ({
      mode: 'at',
      tick: String(tick),
      periodMs: 0,
      earlyMs: 0,
      keepMs: keepAt,
      keepTicks: keepAt,
    });
    const time = schedule.cronTime as { toMillis?: () => number } | string | Date;
    if (time instanceof Date) return () => at(time.getTime());
    if (typeof time === 'object' && typeof time?.toMillis === 'function') {
      const ms = time.toMillis();
      return () => at(ms);
    }
    let cron: Cron;
    try {
      cron = new Cron(String(time), {
        paused: true,
        ...(schedule.timeZone ? { timezone: schedule.timeZone } : {}),
        ...(schedule.utcOffset !== undefined ? { utcOffset: schedule.utcOffset } : {}),
      });
    } catch (err) {
      throw new RedisLockError(
        `@OncePerTick on ${where}: cannot read the @Cron schedule ${JSON.stringify(String(time))}: ${(err as Error).message}`,
      );
    }
    return (nowMs) => {
      const [previous] = cron.previousRuns(1, new Date(nowMs + CRON_EARLY_MS));
      if (!previous) {
        throw new RedisLockError(`@OncePerTick on ${where}: the @Cron schedule has no past tick`);
      }
      const tick = previous.getTime();
      // A tick croner moved out of a DST gap (a local time that does not exist that day: croner
      // runs it at the gap's end, 03:00 for 02:30 in Sydney) is one the cron package of
      // @nestjs/schedule runs later, at its time plus the gap (03:30). That call is this tick's,
      // up to a gap late: its claim is taken and kept that much longer. (Refused as too old, no
      // instance ran the job that day.) A tick croner did not move keeps the usual bound.
      if (!cron.match(previous)) {
        const late = Math.min(Math.max(0, nowMs - tick), MAX_DST_GAP_MS);
        return { ...at(tick), keepMs: keepAt + late, keepTicks: keepAt + late };
      }
      return at(tick);
    };
  }
  if (!Number.isInteger(schedule.ms) || schedule.ms < 1) {
    throw new RedisLockError(
      `@OncePerTick on ${where}: the @${schedule.kind === 'interval' ? 'Interval' : 'Timeout'} has no usable number of ms (${schedule.ms})`,
    );
  }
  if (schedule.kind === 'timeout') {
    const once: TickClaim = {
      mode: 'once',
      tick: '0',
      periodMs: 0,
      earlyMs: 0,
      keepMs: s.windowMs,
      keepTicks: 0,
    };
    return () => once;
  }
  const every: TickClaim = {
    mode: 'every',
    tick: '',
    periodMs: schedule.ms,
    earlyMs: Math.min(Math.floor(schedule.ms / 4), 1_000),
    keepMs: 4 * schedule.ms + s.startLeaseMs + KEEP_SLACK_MS,
    keepTicks: 4,
  };
  return () => every;
}
