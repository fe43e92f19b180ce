import { Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { RedisLockEvents } from '../events/redis-lock-events';
import type { LockLostEvent, LockTimeoutEvent } from '../events/redis-lock-event-map';
import { RedisLockConnection } from '../redis/redis-connection';
import { ThrottledWarning } from '../redis/throttled-warning';
import { recentEventsKey, throughputKey } from './dashboard-keys';
import { DASHBOARD_SCRIPTS } from './dashboard-scripts';

/** Recent timeouts and lost locks kept in Redis, and for how long after the last one. */
export const RECENT_EVENTS_MAX = 100;
export const RECENT_EVENTS_TTL_MS = 24 * 3_600_000;
/** Seconds of throughput kept per queue (the sparkline shows the last 60). */
export const THROUGHPUT_WINDOW_S = 120;

/**
 * Writes what the dashboard shows of every instance into Redis, from `RedisLockEvents` only (off
 * the lock and queue hot paths): each lock timeout and lost lock (a capped, expiring list), and
 * once a second the tasks this instance completed per queue.
 */
@Injectable()
export class DashboardRecorder implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('RedisLockDashboard');
  private readonly warning = new ThrottledWarning(this.logger);
  private readonly completed = new Map<string, number>();
  private readonly stops: Array<() => void> = [];
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly connection: RedisLockConnection,
    private readonly events: RedisLockEvents,
  ) {}

  onModuleInit(): void {
    const instance = this.connection.options.instanceId;
    this.stops.push(
      this.events.on('lock.timeout', (e: LockTimeoutEvent) =>
        this.record({
          kind: 'timeout',
          keys: e.keys,
          reason: e.reason,
          waitedMs: e.waitedMs,
          instance,
        }),
      ),
      this.events.on('lock.lost', (e: LockLostEvent) =>
        this.record({ kind: 'lost', keys: e.keys, reason: e.reason, instance }),
      ),
      this.events.on('task.completed', ({ queue }) =>
        this.completed.set(queue, (this.completed.get(queue) ?? 0) + 1),
      ),
    );
    this.timer = setInterval(() => this.flush(), 1_000);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    for (const stop of this.stops.splice(0)) stop();
    clearInterval(this.timer);
  }

  private record(event: Record<string, unknown>): void {
    const key = recentEventsKey(this.connection.options.keyPrefix);
    this.connection
      .run(
        DASHBOARD_SCRIPTS.recordEvent,
        [key],
        [JSON.stringify(event), RECENT_EVENTS_MAX, RECENT_EVENTS_TTL_MS],
      )
      .catch((err: Error) => this.warning.warn(`could not record a lock event: ${err.message}`));
  }

  private flush(): void {
    for (const [queue, count] of this.completed) {
      this.completed.delete(queue);
      const key = throughputKey(this.connection.options.keyPrefix, queue);
      this.connection
        .run(DASHBOARD_SCRIPTS.recordThroughput, [key], [count, THROUGHPUT_WINDOW_S])
        .catch((err: Error) => this.warning.warn(`could not record throughput: ${err.message}`));
    }
  }
}
