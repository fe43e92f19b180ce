import { Cron } from 'croner';

/** @internal The part of a schedule that decides when its ticks are. */
export interface TickRule {
  cron?: string;
  everyMs?: number;
  tz?: string;
  /** First tick time of an `everyMs` schedule; no tick before it for `cron`. */
  anchor: number;
  endAt?: number;
}

/** @internal The ticks of a schedule: strictly after a time, and the latest at or before one. */
export interface ScheduleTicks {
  /** The first tick after `ms`, or `undefined` when there is none (past `endAt`). */
  after(ms: number): number | undefined;
  /** The latest tick at or before `ms`, or `undefined` when there is none. */
  atOrBefore(ms: number): number | undefined;
}

/**
 * @internal The ticks of `rule`: `anchor + n × everyMs` (n ≥ 0), or the times `cron` matches in
 * `tz` (croner: time zones and DST) from `anchor` on; none after `endAt`.
 * @throws whatever croner throws for a bad expression or time zone
 */
export function scheduleTicks(rule: TickRule): ScheduleTicks {
  const end = rule.endAt ?? Infinity;
  const within = (t: number | undefined) => (t !== undefined && t <= end ? t : undefined);
  if (rule.everyMs !== undefined) {
    const every = rule.everyMs;
    return {
      after: (ms) =>
        within(
          ms < rule.anchor
            ? rule.anchor
            : rule.anchor + (Math.floor((ms - rule.anchor) / every) + 1) * every,
        ),
      atOrBefore: (ms) => {
        const m = Math.min(ms, end);
        return m < rule.anchor
          ? undefined
          : rule.anchor + Math.floor((m - rule.anchor) / every) * every;
      },
    };
  }
  const cron = new Cron(rule.cron!, { paused: true, timezone: rule.tz ?? 'UTC' });
  return {
    after: (ms) => {
      const next = cron.nextRun(new Date(Math.max(ms, rule.anchor - 1)));
      return within(next?.getTime());
    },
    atOrBefore: (ms) => {
      const [previous] = cron.previousRuns(1, new Date(Math.min(ms, end) + 1));
      const t = previous?.getTime();
      return t !== undefined && t >= rule.anchor ? t : undefined;
    },
  };
}
