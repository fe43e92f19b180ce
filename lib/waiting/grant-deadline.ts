/**
 * When a holder must consider its grant (a lock, a semaphore's permits) lost, by its own clock.
 *
 * Redis drops a grant `ms` after it ran the command that set it, by the Redis clock. The holder
 * only knows when it sent that command (`sentAt`, by its own clock), which is no later. Two
 * things can still make the holder believe too long that it holds the grant:
 * - **clock drift**: the holder's clock may run slower than Redis's, so that `ms` of Redis time
 *   pass in less than `ms` of local time. Allowed for: `clockDriftFactor × ms + CLOCK_MARGIN_MS`
 *   (the module option `clockDriftFactor`, default 0.01; the same allowance as quorum mode's
 *   validity).
 * - **timer lateness**: the timer that aborts `signal` fires after its time when the event loop
 *   is busy. Allowed for: the timer is armed `TIMER_LATENESS_MS` early (see `GrantLifetime`).
 *
 * So `expiresAt = sentAt + ms − (clockDriftFactor × ms + CLOCK_MARGIN_MS)`, and `signal` aborts at
 * `expiresAt − TIMER_LATENESS_MS` (docs/locks.md, "The holder's deadline").
 */

/** The fixed part of the drift allowance, in ms: Redis expires keys at 1 ms granularity. */
export const CLOCK_MARGIN_MS = 2;

/**
 * How early the abort timer of a grant is armed before its `expiresAt`, in ms: a timer that fires
 * up to this late (a busy event loop) still aborts `signal` before another holder can be granted.
 * Capped at a quarter of the grant's TTL, so that short grants keep most of their life.
 */
export const TIMER_LATENESS_MS = 20;

/**
 * The drift allowance of a grant that Redis keeps for `ms`: `clockDriftFactor × ms + 2 ms`.
 * @param ms the grant's TTL (or what was left of it when granted)
 * @param clockDriftFactor the module option `clockDriftFactor`
 */
export function clockDriftMs(ms: number, clockDriftFactor: number): number {
  return clockDriftFactor * ms + CLOCK_MARGIN_MS;
}

/**
 * The holder's deadline (`expiresAt`) of a grant that Redis keeps for `ms` after a command sent
 * at `sentAt`: `sentAt + ms − clockDriftMs(ms)`, never before `sentAt`.
 * @param sentAt epoch ms (local clock) when the command that set the grant's TTL was sent
 * @param ms the TTL the command set, in ms
 * @param clockDriftFactor the module option `clockDriftFactor`
 */
export function holderDeadline(sentAt: number, ms: number, clockDriftFactor: number): number {
  return sentAt + Math.max(0, ms - clockDriftMs(ms, clockDriftFactor));
}

/** How long before `expiresAt` the abort timer of a grant with TTL `ttlMs` is armed, in ms. */
export function timerLatenessMs(ttlMs: number): number {
  return Math.min(TIMER_LATENESS_MS, ttlMs / 4);
}
