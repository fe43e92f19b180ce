import type { LockAdapter } from '../adapters/lock-adapter';
import { monotonicMs } from '../support/monotonic-clock';

/** What the orchestrator sends a parked process to start its waiters. */
export interface ParkParams {
  /** The one key the holder holds and every waiter waits for. */
  key: string;
  /** Waiters of this process. */
  waiters: number;
  /** How long each waiter may wait (the library's own option; see `LockAdapter.acquire`). */
  waitMs: number;
}

/** How the waiters of one parked process ended. */
export interface ParkReport {
  /** Waiters that got the lock (and released it at once). */
  acquired: number;
  /** Monotonic ms at which the last of them got it; `null` when none did. */
  lastAcquiredAt: number | null;
  /** Waiters whose library gave up (e.g. redlock after its default retries). */
  gaveUp: number;
  /** One give-up message, to show why. */
  gaveUpSample?: string;
  /** Waiters still waiting at the deadline. */
  unfinished: number;
}

/**
 * One parked process: `start` calls acquire `waiters` times on one held key and returns at once;
 * each waiter releases as soon as it gets the lock. `finish` reports how they ended, by a
 * deadline.
 */
export class ParkedRole {
  private settled?: Promise<unknown>;
  private report?: ParkReport;

  constructor(private readonly adapter: LockAdapter) {}

  /** Starts the waiters: every one of them has called acquire when this returns. */
  start({ key, waiters, waitMs }: ParkParams): void {
    const report: ParkReport = {
      acquired: 0,
      lastAcquiredAt: null,
      gaveUp: 0,
      unfinished: waiters,
    };
    this.report = report;
    const waiter = async () => {
      let lock: unknown;
      try {
        lock = await this.adapter.acquire(key, waitMs);
      } catch (err) {
        report.gaveUp++;
        report.gaveUpSample ??= (err as Error).message;
        report.unfinished--;
        return;
      }
      report.acquired++;
      report.lastAcquiredAt = monotonicMs();
      report.unfinished--;
      await this.adapter.release(lock);
    };
    this.settled = Promise.allSettled(Array.from({ length: waiters }, waiter));
  }

  /**
   * Resolves once every waiter has got the lock or given up, or at `deadline` (monotonic ms),
   * whichever comes first, with how they ended by then.
   */
  async finish({ deadline }: { deadline: number }): Promise<ParkReport> {
    if (!this.settled || !this.report) throw new Error('finish before start');
    let timer: NodeJS.Timeout | undefined;
    const capped = new Promise((resolve) => {
      timer = setTimeout(resolve, Math.max(0, deadline - monotonicMs()));
    });
    await Promise.race([this.settled, capped]).finally(() => clearTimeout(timer));
    const report = { ...this.report };
    this.settled = this.report = undefined;
    return report;
  }
}
