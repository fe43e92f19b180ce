import type {
  BatchObservableCallback,
  Counter,
  Histogram,
  Meter,
  ObservableCallback,
  ObservableGauge,
} from '@opentelemetry/api';
import type { RedisLockEvents } from '../events/redis-lock-events';
import type { LockLostEvent } from '../events/redis-lock-event-map';
import { bounded } from '../redis/bounded';
import { libraryMeter } from './otel';
import type { QueueBacklog } from './queue-backlog';

/** The `lock` attribute of a lock without a `label` (see docs/observability.md). */
export const UNLABELLED = '(unlabelled)';

/** How an acquisition ended (the `outcome` attribute of `redis_lock.lock.acquire.wait`). */
export type AcquireOutcome = 'acquired' | 'timeout' | 'error';

/** How a lock came to a waiting caller without an attempt of its own (`handoffs`' `kind`). */
export type HandoffKind = 'local' | 'remote';

interface LockInstruments {
  wait: Histogram;
  held: Histogram;
  lost: Counter;
  handoffs: Counter;
  waiters: ObservableGauge;
  observeWaiters: ObservableCallback;
}

/**
 * The lock instruments (see docs/observability.md), made on first use from the global meter
 * provider; every method does nothing when `@opentelemetry/api` is not installed.
 */
export class LockMetrics {
  private instruments?: LockInstruments | null;
  /** Callers of this instance in an acquisition, by label (only while instruments exist). */
  private readonly waiting = new Map<string, number>();

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

  /** A lock came to a waiting caller by a handoff of `kind`. */
  handoff(label: string, kind: HandoffKind): void {
    this.get()?.handoffs.add(1, { lock: label, kind });
  }

  /**
   * A caller of this instance starts an acquisition: counted by `redis_lock.lock.waiters` until
   * `waitEnded`. Returns whether it was counted (`false`, and nothing done, without instruments).
   */
  waitStarted(label: string): boolean {
    if (!this.get()) return false;
    this.waiting.set(label, (this.waiting.get(label) ?? 0) + 1);
    return true;
  }

  /**
   * The acquisition of a caller counted by `waitStarted` ended (however it ended). A label stays
   * at `0` (labels are a bounded set): an SDK keeps showing a series' last value otherwise.
   */
  waitEnded(label: string): void {
    this.waiting.set(label, this.waiting.get(label)! - 1);
  }

  /** Stops observing this instance's waiters (module shutdown). */
  close(): void {
    const i = this.instruments;
    i?.waiters.removeCallback(i.observeWaiters);
  }

  private get(): LockInstruments | undefined {
    if (this.instruments === undefined) {
      const meter = libraryMeter();
      this.instruments = meter ? this.make(meter) : null;
      this.instruments?.waiters.addCallback(this.instruments.observeWaiters);
    }
    return this.instruments ?? undefined;
  }

  private make(meter: Meter): LockInstruments {
    return {
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
      handoffs: meter.createCounter('redis_lock.lock.handoffs', {
        description:
          'Locks handed to a waiting caller: by a caller of this process (local) or through Redis (remote)',
      }),
      waiters: meter.createObservableGauge('redis_lock.lock.waiters', {
        description: 'Callers of this instance waiting to acquire a lock, by lock label',
      }),
      observeWaiters: (result) => {
        for (const [label, n] of this.waiting) result.observe(n, { lock: label });
      },
    };
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
  const cancelled = counter('cancelled', 'Running tasks that ended cancelled');
  const timedOut = counter('timeouts', 'Attempts that ran past their run timeout');
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
    events.on('task.cancelled', (e) => cancelled.add(1, { queue: e.queue })),
    events.on('task.timeout', (e) => timedOut.add(1, { queue: e.queue })),
  ];
  return () => offs.forEach((off) => off());
}

/** Task states of the `redis_lock.queue.tasks` gauge. */
const GAUGED_STATES = ['ready', 'delayed', 'leased', 'dead'] as const;

/** How long one collection of the queue gauges may wait for Redis, in ms. */
export const QUEUE_GAUGES_TIMEOUT_MS = 1_000;

/** What the queue gauges read: the queues with workers in this process, and their backlog. */
export interface QueueGaugeSource {
  /** Queues with at least one worker of this process running. */
  workerQueues(): string[];
  backlog(queue: string): Promise<QueueBacklog>;
}

/**
 * Observes the queue gauges (see docs/observability.md) of the queues that have (had) workers in
 * this process: one batch callback per collection reads every such queue's backlog, bounded by
 * `timeoutMs` altogether (on timeout or a Redis error nothing is observed for that collection).
 * Does nothing without an SDK. Returns the function that stops observing.
 */
export function observeQueues(
  source: QueueGaugeSource,
  timeoutMs = QUEUE_GAUGES_TIMEOUT_MS,
): () => void {
  const meter = libraryMeter();
  if (!meter) return () => undefined;
  const tasks = meter.createObservableGauge('redis_lock.queue.tasks', {
    description: 'Tasks of a queue with workers in this process, by state',
  });
  const age = meter.createObservableGauge('redis_lock.queue.oldest_ready.age', {
    unit: 'ms',
    description: 'How long the oldest ready task of a queue has been due',
  });
  // Queues that had a worker here stay observed (an SDK keeps showing a series' last value).
  const seen = new Set<string>();
  const callback: BatchObservableCallback = async (result) => {
    for (const queue of source.workerQueues()) seen.add(queue);
    if (seen.size === 0) return;
    const queues = [...seen];
    let backlogs: QueueBacklog[];
    try {
      backlogs = await bounded(
        'queue gauges',
        Promise.all(queues.map((q) => source.backlog(q))),
        timeoutMs,
      );
    } catch {
      return;
    }
    backlogs.forEach(({ stats, oldestReadyMs }, i) => {
      const queue = queues[i];
      for (const state of GAUGED_STATES) result.observe(tasks, stats[state], { queue, state });
      result.observe(age, oldestReadyMs, { queue });
    });
  };
  meter.addBatchObservableCallback(callback, [tasks, age]);
  return () => meter.removeBatchObservableCallback(callback, [tasks, age]);
}
