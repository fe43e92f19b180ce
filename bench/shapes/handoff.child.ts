import type { HeldLock, LockAdapter } from '../adapters/lock-adapter';
import { monotonicMs, sleep } from '../support/monotonic-clock';
import { requestCount } from '../support/request-counter';

/** The holder's side of one handoff: when it called release, and what releasing cost. */
export interface ReleaseReport {
  /** Monotonic ms just before release was called. */
  releasedAt: number;
  requests: number;
}

/**
 * The waiter's side of one handoff: when it got the lock, or, when the library gave up, how long
 * it had waited; and the requests it sent from calling acquire until then.
 */
export type AcquireReport =
  | { acquiredAt: number; requests: number }
  | { error: string; gaveUpAfterMs: number; requests: number };

/**
 * One process's part in the handoff shape: as holder it takes the lock and later releases it;
 * as waiter it blocks on the same key and reports when it got it.
 */
export class HandoffRole {
  private held?: HeldLock;
  private waiting?: Promise<AcquireReport>;

  constructor(private readonly adapter: LockAdapter) {}

  /** Holder: acquires `key` and keeps it. */
  async hold(key: string): Promise<void> {
    this.held = await this.adapter.acquire(key);
  }

  /** Holder: after `delayMs`, notes the time and releases. */
  async release(delayMs: number): Promise<ReleaseReport> {
    if (this.held === undefined) throw new Error('release before hold');
    await sleep(delayMs);
    const before = requestCount();
    const releasedAt = monotonicMs();
    await this.adapter.release(this.held);
    this.held = undefined;
    return { releasedAt, requests: requestCount() - before };
  }

  /** Waiter: calls acquire on `key` and returns at once (the acquisition goes on). */
  startWait(key: string): void {
    const before = requestCount();
    const asked = monotonicMs();
    this.waiting = this.adapter.acquire(key).then(
      async (lock) => {
        const acquiredAt = monotonicMs();
        const requests = requestCount() - before;
        await this.adapter.release(lock);
        return { acquiredAt, requests };
      },
      (err: Error) => ({
        error: err.message,
        gaveUpAfterMs: monotonicMs() - asked,
        requests: requestCount() - before,
      }),
    );
  }

  /** Waiter: resolves when the acquisition started by `startWait` is over (and released). */
  async finishWait(): Promise<AcquireReport> {
    if (!this.waiting) throw new Error('finishWait before startWait');
    const report = await this.waiting;
    this.waiting = undefined;
    return report;
  }
}
