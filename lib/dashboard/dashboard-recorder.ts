import { BeforeApplicationShutdown, Injectable, OnModuleInit } from '@nestjs/common';
import { RedactingLogger } from '../redaction/redacting-logger';
import type { LockLostEvent, LockTimeoutEvent } from '../events/redis-lock-event-map';
import type { RedisLockConnection } from '../redis/redis-connection';
import { ThrottledWarning } from '../redis/throttled-warning';
import { DashboardCore } from './dashboard-core';
import { localWaitersKey, recentEventsKey, shownLocksKey, throughputKey } from './dashboard-keys';
import { DASHBOARD_SCRIPTS } from './dashboard-scripts';

/** Recent lock timeouts and lost locks kept in Redis (the newest). */
export const RECENT_EVENTS_MAX = 100;
/**
 * Lock names kept per recorded event (the first ones; `keysTotal` counts them all): a multi-key
 * acquisition may name thousands, and the overview carries the whole recent list every second.
 */
export const RECENT_EVENT_KEYS_MAX = 10;
/** How long the recent list lives after its last write, in ms (a day). */
export const RECENT_EVENTS_TTL_MS = 24 * 3_600_000;
/** Seconds of throughput kept per queue (the sparkline shows the last 60). */
export const THROUGHPUT_WINDOW_S = 120;
/** How long a lock a dashboard showed stays in the instances' local-waiter reports, in ms. */
export const SHOWN_LOCKS_KEEP_MS = 5_000;
/** Lock names whose local waiters are reported at most (the most recently shown). */
export const SHOWN_LOCKS_MAX = 1_000;
/** Age past which an instance's local-waiter report is ignored (it stopped reporting), in ms. */
export const LOCAL_REPORT_STALE_MS = 5_000;

/** The first `RECENT_EVENT_KEYS_MAX` lock names of an event, and how many it had when cut. */
function shownKeys(keys: readonly string[]): { keys: string[]; keysTotal?: number } {
  if (keys.length <= RECENT_EVENT_KEYS_MAX) return { keys: [...keys] };
  return { keys: keys.slice(0, RECENT_EVENT_KEYS_MAX), keysTotal: keys.length };
}

/**
 * Writes what the dashboard shows of every instance into Redis, off the lock and queue hot paths:
 * once a second, the lock timeouts and lost locks this instance saw (from `RedisLockEvents`, into
 * a capped, expiring list), the tasks it completed per queue, and how many of its callers wait in
 * its local cohorts for the locks a dashboard shows (`LockService.localWaiters`, read from memory).
 * A listener only appends to memory; a storm of timeouts costs one script call a second.
 */
@Injectable()
export class DashboardRecorder implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new RedactingLogger('RedisLockDashboard');
  private readonly warning = new ThrottledWarning(this.logger);
  private readonly completed = new Map<string, number>();
  /** Lock events of the last second, as JSON; the newest `RECENT_EVENTS_MAX` at most. */
  private readonly pending: string[] = [];
  private readonly stops: Array<() => void> = [];
  private timer?: NodeJS.Timeout;
  /** The lock names a dashboard shows, as the last local-waiter report returned them. */
  private shown: string[] = [];

  constructor(private readonly core: DashboardCore) {}

  private get connection(): RedisLockConnection {
    return this.core.connection;
  }

  onModuleInit(): void {
    const instance = this.connection.options.instanceId;
    const events = this.core.events;
    this.stops.push(
      events.on('lock.timeout', (e: LockTimeoutEvent) =>
        this.record({
          kind: 'timeout',
          ...shownKeys(e.keys),
          reason: e.reason,
          waitedMs: e.waitedMs,
          instance,
        }),
      ),
      events.on('lock.lost', (e: LockLostEvent) =>
        this.record({ kind: 'lost', ...shownKeys(e.keys), reason: e.reason, instance }),
      ),
      events.on('task.completed', ({ queue }) =>
        this.completed.set(queue, (this.completed.get(queue) ?? 0) + 1),
      ),
    );
    this.timer = setInterval(() => void this.flush(), 1_000);
    this.timer.unref();
  }

  /**
   * Stops listening, sends what is left and withdraws its local-waiter report (the lock module's
   * connection is still open here).
   */
  async beforeApplicationShutdown(): Promise<void> {
    // Never started (the app failed to start, e.g. without RedisLockModule): nothing to send.
    if (!this.timer) return;
    for (const stop of this.stops.splice(0)) stop();
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flush(true);
  }

  private record(event: Record<string, unknown>): void {
    if (this.pending.push(JSON.stringify(event)) > RECENT_EVENTS_MAX) this.pending.shift();
  }

  /** Sends what the last second collected (also at shutdown, so nothing seen is lost). */
  private async flush(final = false): Promise<void> {
    const writes: Array<Promise<unknown>> = [this.reportLocalWaiters(final)];
    const prefix = this.connection.options.keyPrefix;
    if (this.pending.length > 0) {
      const events = this.pending.splice(0);
      writes.push(
        this.connection
          .run(
            DASHBOARD_SCRIPTS.recordEvents,
            [recentEventsKey(prefix)],
            [RECENT_EVENTS_MAX, RECENT_EVENTS_TTL_MS, ...events],
          )
          .catch((err: Error) => this.warning.warn(`could not record lock events: ${err.message}`)),
      );
    }
    for (const [queue, count] of this.completed) {
      writes.push(
        this.connection
          .run(
            DASHBOARD_SCRIPTS.recordThroughput,
            [throughputKey(prefix, queue)],
            [count, THROUGHPUT_WINDOW_S],
          )
          .catch((err: Error) => this.warning.warn(`could not record throughput: ${err.message}`)),
      );
    }
    this.completed.clear();
    await Promise.all(writes);
  }

  /**
   * Reports how many callers of this instance wait in its local cohorts for each lock a dashboard
   * showed lately (none at shutdown), and learns the locks to count next time. Lock lines show one
   * entry per instance: these are the callers behind it, or behind a holder of this instance.
   */
  private async reportLocalWaiters(final: boolean): Promise<void> {
    const { keyPrefix: prefix, instanceId, nodes } = this.connection.options;
    // Quorum mode has no lines and no cohorts, and the dashboard lists no locks there.
    if (nodes.length > 0) return;
    const counts: Array<[string, number]> = [];
    for (const name of final ? [] : this.shown) {
      const n = this.core.locks.localWaiters(name, prefix);
      if (n > 0) counts.push([name, n]);
    }
    try {
      this.shown = (await this.connection.run(
        DASHBOARD_SCRIPTS.reportLocalWaiters,
        [shownLocksKey(prefix), localWaitersKey(prefix)],
        [
          instanceId,
          counts.length > 0 ? JSON.stringify(Object.fromEntries(counts)) : '',
          LOCAL_REPORT_STALE_MS,
          SHOWN_LOCKS_KEEP_MS,
        ],
      )) as string[];
    } catch (err) {
      this.warning.warn(`could not report local waiters: ${(err as Error).message}`);
    }
  }
}
