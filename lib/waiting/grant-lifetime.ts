import { timerLatenessMs } from './grant-deadline';

/**
 * The lifetime of a grant (a lock, a semaphore's permits) as its holder sees it: when it expires,
 * and an AbortSignal that aborts once it is known to be lost (its expiry is near by the local
 * clock, or `end(reason)`). The expiry already allows for clock drift (`holderDeadline`); the
 * timer is armed `timerLatenessMs(ttlMs)` before it, so that a timer that fires late still aborts
 * before Redis can grant anyone else, and the grant counts as lost from then on. The signal and
 * its timer are made when `signal` is first read: most grants are released long before anyone
 * looks, and the hot path should not pay for them.
 */
export class GrantLifetime<E extends Error> {
  private controller?: AbortController;
  private lostReason?: E;
  private expiryTimer?: NodeJS.Timeout;
  private ended = false;

  private readonly lateness: number;

  /**
   * @param expiry epoch ms until which the grant is surely held (`holderDeadline`)
   * @param ttlMs the grant's TTL: bounds how early the timer is armed (`timerLatenessMs`)
   * @param expired the reason of a grant whose expiry passed at `expiresAt`
   * @param onExpired told once when the expiry timer finds the grant lost
   */
  constructor(
    private expiry: number,
    ttlMs: number,
    private readonly expired: (expiresAt: number) => E,
    private readonly onExpired?: (reason: E) => void,
  ) {
    this.lateness = timerLatenessMs(ttlMs);
  }

  /** Whether it was released or found lost. */
  get isEnded(): boolean {
    return this.ended;
  }

  get expiresAt(): number {
    return this.expiry;
  }

  /** Whether it was released (ended without being found lost). */
  get isReleased(): boolean {
    return this.ended && this.lostReason === undefined;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.lostReason) this.controller.abort(this.lostReason);
      // Its expiry passed before anyone looked: lost now, not one timer turn later (a first
      // `throwIfAborted()` would pass).
      else if (!this.ended && this.isLost) this.expire();
      else this.armExpiry();
    }
    return this.controller.signal;
  }

  /** Whether the grant was lost (signal aborted, or would be if read). */
  get isLost(): boolean {
    return this.lostReason !== undefined || this.expiry - this.lateness <= Date.now();
  }

  setExpiresAt(expiresAt: number): void {
    this.expiry = expiresAt;
    if (this.controller) this.armExpiry();
  }

  /**
   * Not held any more: stops the expiry timer and, when it was lost (`reason` given) rather than
   * released, aborts `signal` with `reason`. Returns `true` when this call found it lost (once).
   * Once ended, it stays as it ended: a release repeated after the TTL would run out does not make
   * a released grant lost.
   */
  end(reason?: E): boolean {
    clearTimeout(this.expiryTimer);
    this.expiryTimer = undefined;
    const before = this.ended;
    this.ended = true;
    if (!reason || this.lostReason || before) return false;
    this.lostReason = reason;
    if (this.controller && !this.controller.signal.aborted) this.controller.abort(reason);
    return true;
  }

  private armExpiry(): void {
    clearTimeout(this.expiryTimer);
    if (this.ended) return;
    this.expiryTimer = setTimeout(
      () => this.expire(),
      Math.max(0, this.expiry - this.lateness - Date.now()),
    );
    this.expiryTimer.unref();
  }

  /** Its expiry passed: lost, with the reason `expired` gives (told once). */
  private expire(): void {
    const reason = this.expired(this.expiry);
    if (this.end(reason)) this.onExpired?.(reason);
  }
}
