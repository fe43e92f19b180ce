import { BeforeApplicationShutdown, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import type { LockLostEvent, LockTimeoutEvent } from '../events/redis-lock-event-map';
import type { RedisLockConnection } from '../redis/redis-connection';
import { ThrottledWarning } from '../redis/throttled-warning';
import { DashboardCore } from './dashboard-core';
import { recentEventsKey, throughputKey } from './dashboard-keys';
import { DASHBOARD_SCRIPTS } from './dashboard-scripts';

/** Recent lock timeouts and lost locks kept in Redis (the newest). */
export const RECENT_EVENTS_MAX = 100;
/** How long the recent list lives after its last write, in ms (a day). */
export const RECENT_EVENTS_TTL_MS = 24 * 3_600_000;
/** Seconds of throughput kept per queue (the sparkline shows the last 60). */
export const THROUGHPUT_WINDOW_S = 120;

/**
 * Writes what the dashboard shows of every instance into Redis, from `RedisLockEvents` only (off
 * the lock and queue hot paths): once a second, the lock timeouts and lost locks this instance saw
 * (into a capped, expiring list) and the tasks it completed per queue. A listener only appends to
 * memory; a storm of timeouts costs one script call a second.
 */
@Injectable()
export class DashboardRecorder implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('RedisLockDashboard');
  private readonly warning = new ThrottledWarning(this.logger);
  private readonly completed = new Map<string, number>();
  /** Lock events of the last second, as JSON; the newest `RECENT_EVENTS_MAX` at most. */
  private readonly pending: string[] = [];
  private readonly stops: Array<() => void> = [];
  private timer?: NodeJS.Timeout;

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
          keys: e.keys,
          reason: e.reason,
          waitedMs: e.waitedMs,
          instance,
        }),
      ),
      events.on('lock.lost', (e: LockLostEvent) =>
        this.record({ kind: 'lost', keys: e.keys, reason: e.reason, instance }),
      ),
      events.on('task.completed', ({ queue }) =>
        this.completed.set(queue, (this.completed.get(queue) ?? 0) + 1),
      ),
    );
    this.timer = setInterval(() => void this.flush(), 1_000);
    this.timer.unref();
  }

  /** Stops listening and sends what is left (the module's connection is still open here). */
  async beforeApplicationShutdown(): Promise<void> {
    // Never started (the app failed to start, e.g. without RedisLockModule): nothing to send.
    if (!this.timer) return;
    for (const stop of this.stops.splice(0)) stop();
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  private record(event: Record<string, unknown>): void {
    if (this.pending.push(JSON.stringify(event)) > RECENT_EVENTS_MAX) this.pending.shift();
  }

  /** Sends what the last second collected (also at shutdown, so nothing seen is lost). */
  private async flush(): Promise<void> {
    const writes: Array<Promise<unknown>> = [];
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
}
