import type { Counter, Histogram } from '@opentelemetry/api';
import type { RedisLockEvents } from '../events/redis-lock-events';
import type { LockLostEvent } from '../events/redis-lock-event-map';
import { libraryMeter } from './otel';

/** The `lock` attribute of a lock without a `label` (see docs/observability.md). */
export const UNLABELLED = '(unlabelled)';

/** How an acquisition ended (the `outcome` attribute of `redis_lock.lock.acquire.wait`). */
export type AcquireOutcome = 'acquired' | 'timeout' | 'error';

interface LockInstruments {
  wait: Histogram;
  held: Histogram;
  lost: Counter;
}

/**
 * The lock instruments (see docs/observability.md), made on first use from the global meter
 * provider; every method does nothing when `@opentelemetry/api` is not installed.
 */
export class LockMetrics {
  private instruments?: LockInstruments | null;

  /** An acquisition that waited `ms` ended with `outcome`. */
  acquired(label: string, outcome: AcquireOutcome, ms: number): void {
    this.get()?.wait.record(ms, { lock: label, outcome });
  }

  /** A lock held `ms` was released. */
  released(label: string, ms: number): void {
    this.get()?.held.record(ms, { lock: label });
  }

  /** A held lock was found lost. */
  lost(label: string, reason: LockLostEvent['reason']): void {
    this.get()?.lost.add(1, { lock: label, reason });
  }

  private get(): LockInstruments | undefined {
    if (this.instruments === undefined) {
      const meter = libraryMeter();
      this.instruments = meter
        ? {
            wait: meter.createHistogram('redis_lock.lock.acquire.wait', {
              unit: 'ms',
              description: 'How long lock acquisitions waited, by outcome',
            }),
            held: meter.createHistogram('redis_lock.lock.held', {
              unit: 'ms',
              description: 'How long locks were held (acquired to released)',
            }),
            lost: meter.createCounter('redis_lock.lock.lost', {
              description: 'Held locks found lost (expired, taken over, or not extendable)',
            }),
          }
        : null;
    }
    return this.instruments ?? undefined;
  }
}

/**
 * Records the queue instruments (see docs/observability.md) from the task events of `events`;
 * subscribes only when `@opentelemetry/api` is installed. Returns the unsubscribe function.
 */
export function recordQueueMetrics(events: RedisLockEvents): () => void {
  const meter = libraryMeter();
  if (!meter) return () => undefined;
  const run = meter.createHistogram('redis_lock.queue.task.run', {
    unit: 'ms',
    description: 'How long task handlers ran, by queue and outcome',
  });
  const wait = meter.createHistogram('redis_lock.queue.task.wait', {
    unit: 'ms',
    description: 'From enqueue to claim (Redis clock), by queue',
  });
  const counter = (name: string, description: string) =>
    meter.createCounter(`redis_lock.queue.tasks.${name}`, { description });
  const completed = counter('completed', 'Tasks whose handler resolved (acked)');
  const retried = counter('retried', 'Failed tasks queued again');
  const dead = counter('dead', 'Failed tasks moved to the dead-letter set');
  const offs = [
    events.on('task.completed', (e) => {
      completed.add(1, { queue: e.queue });
      run.record(e.runMs, { queue: e.queue, outcome: 'completed' });
      if (e.waitMs !== undefined) wait.record(e.waitMs, { queue: e.queue });
    }),
    events.on('task.failed', (e) => {
      run.record(e.runMs, { queue: e.queue, outcome: 'failed' });
      if (e.waitMs !== undefined) wait.record(e.waitMs, { queue: e.queue });
    }),
    events.on('task.retried', (e) => retried.add(1, { queue: e.queue })),
    events.on('task.dead', (e) => dead.add(1, { queue: e.queue })),
  ];
  return () => offs.forEach((off) => off());
}
