import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { checkKnownKeys, checkMs, MAX_TIMER_MS } from '../options/validate';

/** Settings of a waiting room (`WaitingRoomService.open`), stored in Redis and shared by every instance. */
export interface WaitingRoomOptions {
  /**
   * Visitors let in per second, first come first served, across every instance: `0`, or a number
   * from `1000 / 2_147_483_647` (about 4.66e-7: one visitor per 24.8 days, the longest timer
   * Node keeps) to 100,000 (fractions allowed: `0.5` is one every 2 s). `0` holds the line:
   * visitors join and learn their place, nobody is admitted (before the sale starts).
   */
  admitPerSecond: number;
  /** How long an admitted visitor's pass is valid, in ms (an integer of at least 1). */
  passTtlMs: number;
  /**
   * A visitor in line that is not seen for this long (no `join`, no `wait` on any instance) loses
   * its place, in ms: an integer of at least 3,000. A visitor parked in `wait` is seen every
   * `absentMs / 3` by its instance.
   * @default 60_000
   */
  absentMs?: number;
}

/** Where a visitor stands (`join`, `wait`, and `onProgress` of `wait`). */
export interface WaitingRoomStatus {
  /** True when the visitor holds a valid pass: it may go in. */
  admitted: boolean;
  /** Its place in line, 1 = next; 0 once admitted. */
  position: number;
  /**
   * About how long until it is admitted, in ms, at the room's current rate (0 once admitted);
   * `null` while the room holds (`admitPerSecond: 0`).
   */
  etaMs: number | null;
  /** Once admitted, the ms its pass has left (0 before). */
  passExpiresInMs: number;
}

/** Options of `WaitingRoomService.wait`. */
export interface WaitingRoomWaitOptions {
  /**
   * How long to wait for the visitor's turn, in ms; past it `wait` rejects with
   * `WaitingRoomTimeoutError` and the visitor keeps its place.
   */
  waitMs: number;
  /** Aborting it stops the wait (rejects with the signal's reason); the visitor keeps its place. */
  signal?: AbortSignal;
  /**
   * Called with the visitor's position and ETA while it waits, at most once a second and only when
   * they changed; computed from the admissions this instance hears of, with no Redis call per
   * visitor (corrected by Redis every `absentMs / 3`). One that throws is logged (`error`) and
   * ignored: the wait goes on.
   */
  onProgress?: (status: WaitingRoomStatus) => void;
}

/** Largest `admitPerSecond`. */
export const MAX_ADMIT_PER_SECOND = 100_000;
/**
 * Least `admitPerSecond` above 0: one visitor per `MAX_TIMER_MS` (about 24.8 days), so that the
 * interval between two admissions, `1000 / admitPerSecond` ms, fits a Node timer.
 */
export const MIN_ADMIT_PER_SECOND = 1000 / MAX_TIMER_MS;
/** Least `absentMs`: a parked visitor is marked seen every third of it. */
export const MIN_ABSENT_MS = 3_000;
const KNOWN = ['admitPerSecond', 'passTtlMs', 'absentMs'];

/** @internal Checks `open`'s options (`RedisLockOptionsError` naming the option). */
export function resolveWaitingRoomOptions(options: unknown): Required<WaitingRoomOptions> {
  const o = checkKnownKeys('options', options, KNOWN);
  const rate = o.admitPerSecond;
  if (
    typeof rate !== 'number' ||
    !Number.isFinite(rate) ||
    rate < 0 ||
    (rate > 0 && rate < MIN_ADMIT_PER_SECOND) ||
    rate > MAX_ADMIT_PER_SECOND
  ) {
    throw new RedisLockOptionsError(
      'admitPerSecond',
      rate,
      `0, or a number from ${MIN_ADMIT_PER_SECOND} (one visitor per 24.8 days) to ${MAX_ADMIT_PER_SECOND}`,
    );
  }
  return {
    admitPerSecond: rate,
    passTtlMs: checkMs('passTtlMs', o.passTtlMs, 1),
    absentMs: o.absentMs === undefined ? 60_000 : checkMs('absentMs', o.absentMs, MIN_ABSENT_MS),
  };
}

/** @internal Checks `wait`'s options. */
export function resolveWaitOptions(options: unknown): WaitingRoomWaitOptions {
  const o = checkKnownKeys('options', options, ['waitMs', 'signal', 'onProgress']);
  const signal = o.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new RedisLockOptionsError('signal', signal, 'an AbortSignal');
  }
  if (o.onProgress !== undefined && typeof o.onProgress !== 'function') {
    throw new RedisLockOptionsError('onProgress', o.onProgress, 'a function');
  }
  return {
    waitMs: checkMs('waitMs', o.waitMs, 0),
    signal,
    onProgress: o.onProgress as WaitingRoomWaitOptions['onProgress'],
  };
}
