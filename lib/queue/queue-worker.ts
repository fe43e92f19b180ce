import type { Logger } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import { QueueError } from '../errors/queue.error';
import { bounded } from '../redis/bounded';
import { QueueTracing } from '../observability/tracing';
import { ThrottledWarning } from '../redis/throttled-warning';
import type { RedisLockEvents } from '../events/redis-lock-events';
import type { RedisLockConnection } from '../redis/redis-connection';
import type { QueueHandler, QueueWorkerHandle } from './interfaces/queue-options.interface';
import type { LeasedTask } from './interfaces/task.interface';
import { retryDelayMs } from './queue-backoff';
import type { QueueRedisKeys } from './queue-keys';
import type { ResolvedWorkerOptions } from './queue-worker-options';
import type { ClaimStepResult, SettleStep } from './queue.service';
import { MAX_IDLE_MS } from './queue.constants';

/** What a worker needs from `QueueService` (called through it, so wrappers of its methods apply). */
export interface QueueWorkerBackend {
  /** @internal like `QueueService.claimBatch`, so the published `implements` clause still holds */
  claimBatch(
    queue: string,
    count: number,
    options: ResolvedWorkerOptions,
    settles?: readonly SettleStep[],
  ): Promise<ClaimStepResult<unknown>>;
  extendLease(task: LeasedTask, ms: number): Promise<boolean>;
}

interface RunningTask {
  readonly task: LeasedTask;
  /** When the handler started (`performance.now()`), for `runMs`. */
  readonly started: number;
  /** When the lease was last extended (or granted), `performance.now()`. */
  renewedAt: number;
  /** Only for a handler that can read its `signal` (see `QueueWorkerRunner.givesSignal`). */
  readonly controller?: AbortController;
  renewing: boolean;
  /** The handler ended or the lease was lost: no more renewals. */
  ended: boolean;
  /** Shutdown gave the task back: its outcome must not be acked or nacked. */
  released: boolean;
  done?: Promise<void>;
}

/** A task whose handler ended, waiting for the next flush. */
interface FinishedTask {
  readonly step: SettleStep;
  readonly runMs: number;
  readonly failure?: { error: unknown };
  /** Called once the flush settled it (or failed to). */
  readonly resolve: () => void;
}

/** Shortest blocking wait, in ms (a due time a moment away is not worth a busy loop). */
const MIN_IDLE_MS = 2;
/** Longest pause after a failed Redis call, in ms (the pause doubles from 100 ms). */
const MAX_ERROR_PAUSE_MS = 5_000;

/**
 * The loop behind `QueueService.process`: claims as many tasks as it has free slots, runs the
 * handler on each (renewing the leases with one timer per worker), acks on success and nacks with
 * backoff on failure. With free slots and nothing ready it blocks on the queue's wake-up list, on
 * its own connection, until an enqueue pushes a marker or the next due time / lease expiry comes
 * (at most `MAX_IDLE_MS`, so it also finds its way back after a reconnect).
 */
export class QueueWorkerRunner implements QueueWorkerHandle {
  private readonly running = new Map<string, RunningTask>();
  private readonly stop = new AbortController();
  private loop?: Promise<void>;
  private closed?: Promise<void>;
  private blocker?: Redis | Cluster;
  private slotFreed?: () => void;
  private errorPause = 0;
  private readonly failures: ThrottledWarning;
  private readonly tracing = new QueueTracing();
  /** Handlers that ended since the last flush, waiting for their ack or nack. */
  private finished: FinishedTask[] = [];
  /** Renews the leases of running tasks: one timer per worker, not one per task. */
  private renewTimer?: NodeJS.Timeout;
  /**
   * Whether the handler gets an `AbortSignal` of its own per task. Creating one costs more than
   * the rest of a task's bookkeeping together (about 5 µs of CPU per task in the bench's drain),
   * so a handler declared with exactly one parameter, which cannot read a second argument, gets
   * none, as BullMQ decides for its processors. No parameters or rest parameters (a wrapper's
   * `(...args)`) get one.
   */
  private readonly givesSignal: boolean;

  constructor(
    readonly queue: string,
    private readonly keys: QueueRedisKeys,
    private readonly handler: QueueHandler,
    private readonly options: ResolvedWorkerOptions,
    private readonly backend: QueueWorkerBackend,
    private readonly connection: RedisLockConnection,
    private readonly logger: Logger,
    private readonly events: RedisLockEvents,
    private readonly onClosed: () => void,
  ) {
    this.failures = new ThrottledWarning(logger);
    this.givesSignal = handler.length !== 1;
  }

  /** Starts the claim loop (once). */
  start(): void {
    if (this.loop) return;
    const period = Math.max(1, Math.floor(this.options.leaseMs / 3));
    this.renewTimer = setInterval(() => this.renewDue(period), period);
    this.renewTimer.unref();
    this.loop = this.run();
  }

  close(): Promise<void> {
    this.closed ??= this.shutdown();
    return this.closed;
  }

  private async run(): Promise<void> {
    while (!this.stop.signal.aborted) {
      const free = this.options.concurrency - this.running.size;
      if (free <= 0) {
        await this.waitForSlot();
        continue;
      }
      let batch: ClaimStepResult<unknown>;
      try {
        batch = await this.backend.claimBatch(this.queue, free, this.options);
        this.errorPause = 0;
      } catch (err) {
        this.logFailure('claim', err);
        await this.pauseAfterError();
        continue;
      }
      if (this.stop.signal.aborted) {
        // Claimed while shutting down: give them straight back, unattempted.
        await this.giveBack(batch.tasks);
        break;
      }
      for (const task of batch.tasks) this.startTask(task);
      if (batch.tasks.length < free) {
        try {
          await this.idle(batch.nextInMs);
        } catch (err) {
          this.logFailure('BLPOP', err);
          await this.pauseAfterError();
        }
      }
    }
  }

  /**
   * Blocks on the wake-up list for `nextInMs` (-1: nothing due or leased) at most. Resolves
   * early on a marker or on close.
   */
  private async idle(nextInMs: number): Promise<void> {
    if (this.stop.signal.aborted) return;
    const ms = Math.min(MAX_IDLE_MS, nextInMs < 0 ? MAX_IDLE_MS : Math.max(MIN_IDLE_MS, nextInMs));
    this.blocker ??= this.connection.duplicate();
    const blocker = this.blocker;
    const popped = bounded(
      'queue BLPOP',
      blocker.blpop(this.keys.wake, (ms / 1000).toFixed(3)),
      ms + this.connection.options.commandTimeoutMs,
    );
    // The race below may settle first; this rejection is then nobody's to handle.
    popped.catch(() => undefined);
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<void>((resolve) => {
      onAbort = resolve;
      this.stop.signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      await Promise.race([popped, aborted]);
    } catch (err) {
      // A BLPOP that outlived its bound may still take a marker later: drop that connection.
      if (this.blocker === blocker) this.blocker = undefined;
      blocker.disconnect();
      throw err;
    } finally {
      this.stop.signal.removeEventListener('abort', onAbort!);
    }
  }

  private waitForSlot(): Promise<void> {
    if (this.stop.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.slotFreed = undefined;
        this.stop.signal.removeEventListener('abort', done);
        resolve();
      };
      this.slotFreed = done;
      this.stop.signal.addEventListener('abort', done, { once: true });
    });
  }

  private pauseAfterError(): Promise<void> {
    this.errorPause = Math.min(MAX_ERROR_PAUSE_MS, this.errorPause ? this.errorPause * 2 : 100);
    if (this.stop.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.stop.signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, this.errorPause);
      this.stop.signal.addEventListener('abort', done, { once: true });
    });
  }

  private startTask(task: LeasedTask): void {
    const started = performance.now();
    const entry: RunningTask = {
      task,
      started,
      renewedAt: started,
      controller: this.givesSignal ? new AbortController() : undefined,
      renewing: false,
      ended: false,
      released: false,
    };
    this.running.set(task.leaseToken, entry);
    entry.done = this.execute(entry).finally(() => {
      this.running.delete(task.leaseToken);
      this.slotFreed?.();
    });
  }

  /**
   * Runs the handler, then queues its ack or nack for the next flush. Resolves once that is done
   * and the tasks claimed in its place run (so the claim loop never claims for this slot too).
   * Never rejects.
   */
  private async execute(entry: RunningTask): Promise<void> {
    const { task } = entry;
    let failure: { error: unknown } | undefined;
    try {
      await this.tracing.process(this.queue, task, () =>
        this.handler(task, entry.controller?.signal as AbortSignal),
      );
    } catch (error) {
      failure = { error };
    }
    entry.ended = true;
    if (entry.released) return;
    const runMs = performance.now() - entry.started;
    const reason = failure && errorMessage(failure.error);
    const step: SettleStep = failure
      ? {
          kind: 'nack',
          task,
          delayMs: retryDelayMs(this.options.backoffMs, task.attempt),
          error: reason,
        }
      : { kind: 'ack', task };
    await new Promise<void>((resolve) => {
      this.finished.push({ step, runMs, failure, resolve });
      if (this.finished.length === 1) setImmediate(() => void this.flush());
    });
  }

  /**
   * Acks and nacks every task finished since the last flush and claims as many in their place, in
   * one round trip: under load, a flush settles every handler that ended in one turn of the event
   * loop.
   */
  private async flush(): Promise<void> {
    const batch = this.finished;
    this.finished = [];
    let result: ClaimStepResult<unknown> | undefined;
    try {
      result = await this.backend.claimBatch(
        this.queue,
        this.stop.signal.aborted ? 0 : batch.length,
        this.options,
        batch.map((f) => f.step),
      );
    } catch (err) {
      // The leases run out and the tasks come back: at-least-once holds without this call.
      this.logFailure(batch.some((f) => f.failure) ? 'nack' : 'ack', err);
    }
    if (result) {
      if (this.stop.signal.aborted) await this.giveBack(result.tasks);
      else for (const t of result.tasks) this.startTask(t);
      batch.forEach((f, i) => this.report(f, result.settled[i]));
    }
    for (const f of batch) f.resolve();
  }

  /** Logs the outcome of a finished task and emits its events. */
  private report(finished: FinishedTask, settled: number): void {
    const { step, runMs, failure } = finished;
    const { task, delayMs = 0, error: reason } = step;
    const base = () => ({
      queue: this.queue,
      id: task.id,
      attempt: task.attempt,
      runMs,
      ...(task.enqueuedAt === undefined
        ? {}
        : { waitMs: task.leaseExpiresAt - this.options.leaseMs - task.enqueuedAt }),
    });
    if (!failure) {
      if (settled === 0) {
        this.logger.warn(
          `queue '${this.queue}': task '${task.id}' finished after its lease was lost; ` +
            'another worker may run it again',
        );
      } else if (this.events.hasListeners('task.completed')) {
        this.events.emit('task.completed', base());
      }
      return;
    }
    if (this.events.hasListeners('task.failed')) {
      this.events.emit('task.failed', { ...base(), error: failure.error });
    }
    if (settled === 2) {
      this.logger.error(
        `queue '${this.queue}': task '${task.id}' failed attempt ${task.attempt} of ` +
          `${this.options.maxAttempts} and moved to dead letter: ${reason}`,
      );
      if (this.events.hasListeners('task.dead')) {
        this.events.emit('task.dead', { ...base(), error: failure.error });
      }
    } else if (settled === 1) {
      const level = this.options.retryLogLevel;
      if (level !== 'off') {
        this.logger[level](
          `queue '${this.queue}': task '${task.id}' failed attempt ${task.attempt} of ` +
            `${this.options.maxAttempts}, retrying in ${delayMs} ms: ${reason}`,
        );
      }
      if (this.events.hasListeners('task.retried')) {
        this.events.emit('task.retried', { ...base(), error: failure.error, delayMs });
      }
    }
  }

  /**
   * Every `period` (`leaseMs / 3`): extends the lease of each running task that was last extended
   * at least half a period ago, so a lease is extended while at least half of it is left.
   */
  private renewDue(period: number): void {
    const now = performance.now();
    for (const entry of this.running.values()) {
      if (now - entry.renewedAt >= period / 2) void this.renew(entry, now);
    }
  }

  private async renew(entry: RunningTask, now: number): Promise<void> {
    if (entry.renewing || entry.released || entry.ended) return;
    entry.renewing = true;
    try {
      const held = await this.backend.extendLease(entry.task, this.options.leaseMs);
      if (held) entry.renewedAt = now;
      else if (!entry.released && !entry.ended) {
        entry.ended = true;
        entry.controller?.abort(
          new QueueError(
            `queue '${this.queue}': lease of task '${entry.task.id}' was lost (it expired and ` +
              'was returned to the queue or claimed by another worker)',
          ),
        );
      }
    } catch (err) {
      this.logFailure('extendLease', err);
    } finally {
      entry.renewing = false;
    }
  }

  private async shutdown(): Promise<void> {
    this.stop.abort();
    this.slotFreed?.();
    await this.loop;
    const inFlight = [...this.running.values()];
    if (inFlight.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(inFlight.map((e) => e.done)),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, this.options.drainTimeoutMs))),
      ]);
      clearTimeout(timer);
    }
    const left = [...this.running.values()];
    for (const entry of left) {
      entry.released = true;
      entry.controller?.abort(
        new QueueError(
          `queue '${this.queue}': the worker shut down; task '${entry.task.id}' was given back`,
        ),
      );
    }
    await this.giveBack(left.map((entry) => entry.task));
    clearInterval(this.renewTimer);
    this.blocker?.disconnect();
    this.blocker = undefined;
    this.onClosed();
  }

  /** Returns tasks to the queue without counting the attempt, in one call. Never rejects. */
  private async giveBack(tasks: readonly LeasedTask[]): Promise<void> {
    if (tasks.length === 0) return;
    try {
      const steps = tasks.map((task): SettleStep => ({ kind: 'release', task }));
      await this.backend.claimBatch(this.queue, 0, this.options, steps);
    } catch (err) {
      // Their leases run out and a later claim returns them (counting the attempt).
      this.logFailure('release', err);
    }
  }

  private logFailure(operation: string, err: unknown): void {
    this.failures.warn(`queue '${this.queue}': worker ${operation} failed: ${errorMessage(err)}`);
    if (this.events.hasListeners('worker.error')) {
      this.events.emit('worker.error', { queue: this.queue, operation, error: err });
    }
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
