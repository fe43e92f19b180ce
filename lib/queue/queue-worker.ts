import type { Logger } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import { QueueError } from '../errors/queue.error';
import { bounded } from '../redis/bounded';
import { ThrottledWarning } from '../redis/throttled-warning';
import type { RedisLockConnection } from '../redis/redis-connection';
import type { QueueHandler, QueueWorkerHandle } from './interfaces/queue-options.interface';
import type { LeasedTask, NackResult } from './interfaces/task.interface';
import { retryDelayMs } from './queue-backoff';
import type { QueueRedisKeys } from './queue-keys';
import type { ResolvedWorkerOptions } from './queue-worker-options';
import { MAX_IDLE_MS } from './queue.constants';

/** What a worker needs from `QueueService` (called through it, so wrappers of its methods apply). */
export interface QueueWorkerBackend {
  /** @internal like `QueueService.claimBatch`, so the published `implements` clause still holds */
  claimBatch(
    queue: string,
    count: number,
    options: { leaseMs: number; maxAttempts: number },
  ): Promise<{ tasks: LeasedTask[]; nextInMs: number }>;
  ack(task: LeasedTask): Promise<boolean>;
  nack(task: LeasedTask, options: { delayMs: number; maxAttempts: number }): Promise<NackResult>;
  extendLease(task: LeasedTask, ms: number): Promise<boolean>;
  release(task: LeasedTask): Promise<boolean>;
}

interface RunningTask {
  readonly task: LeasedTask;
  readonly controller: AbortController;
  renewTimer?: NodeJS.Timeout;
  renewing: boolean;
  /** Shutdown gave the task back: its outcome must not be acked or nacked. */
  released: boolean;
  done?: Promise<void>;
}

/** Shortest blocking wait, in ms (a due time a moment away is not worth a busy loop). */
const MIN_IDLE_MS = 2;
/** Longest pause after a failed Redis call, in ms (the pause doubles from 100 ms). */
const MAX_ERROR_PAUSE_MS = 5_000;

/**
 * The loop behind `QueueService.process`: claims as many tasks as it has free slots, runs the
 * handler on each (renewing the lease every `leaseMs / 3`), acks on success and nacks with
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

  constructor(
    readonly queue: string,
    private readonly keys: QueueRedisKeys,
    private readonly handler: QueueHandler,
    private readonly options: ResolvedWorkerOptions,
    private readonly backend: QueueWorkerBackend,
    private readonly connection: RedisLockConnection,
    private readonly logger: Logger,
    private readonly onClosed: () => void,
  ) {
    this.failures = new ThrottledWarning(logger);
  }

  /** Starts the claim loop (once). */
  start(): void {
    this.loop ??= this.run();
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
      let batch: { tasks: LeasedTask[]; nextInMs: number };
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
        await Promise.all(batch.tasks.map((task) => this.giveBack(task)));
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
    const entry: RunningTask = {
      task,
      controller: new AbortController(),
      renewing: false,
      released: false,
    };
    this.running.set(task.leaseToken, entry);
    entry.renewTimer = setInterval(
      () => void this.renew(entry),
      Math.max(1, Math.floor(this.options.leaseMs / 3)),
    );
    entry.done = this.execute(entry).finally(() => {
      clearInterval(entry.renewTimer);
      this.running.delete(task.leaseToken);
      this.slotFreed?.();
    });
  }

  /** Runs the handler, then acks or nacks. Never rejects. */
  private async execute(entry: RunningTask): Promise<void> {
    const { task } = entry;
    let failure: { error: unknown } | undefined;
    try {
      await this.handler(task, entry.controller.signal);
    } catch (error) {
      failure = { error };
    }
    clearInterval(entry.renewTimer);
    if (entry.released) return;
    try {
      if (!failure) {
        if (!(await this.backend.ack(task))) {
          this.logger.warn(
            `queue '${this.queue}': task '${task.id}' finished after its lease was lost; ` +
              'another worker may run it again',
          );
        }
        return;
      }
      const delayMs = retryDelayMs(this.options.backoffMs, task.attempt);
      const result = await this.backend.nack(task, {
        delayMs,
        maxAttempts: this.options.maxAttempts,
      });
      const reason = failure.error instanceof Error ? failure.error.message : String(failure.error);
      if (result === 'dead') {
        this.logger.error(
          `queue '${this.queue}': task '${task.id}' failed attempt ${task.attempt} of ` +
            `${this.options.maxAttempts} and moved to dead letter: ${reason}`,
        );
      } else if (result === 'retried') {
        this.logger.warn(
          `queue '${this.queue}': task '${task.id}' failed attempt ${task.attempt} of ` +
            `${this.options.maxAttempts}, retrying in ${delayMs} ms: ${reason}`,
        );
      }
    } catch (err) {
      // The lease runs out and the task comes back: at-least-once holds without this call.
      this.logFailure(failure ? 'nack' : 'ack', err);
    }
  }

  private async renew(entry: RunningTask): Promise<void> {
    if (entry.renewing || entry.released) return;
    entry.renewing = true;
    try {
      const held = await this.backend.extendLease(entry.task, this.options.leaseMs);
      if (!held && !entry.released) {
        clearInterval(entry.renewTimer);
        entry.controller.abort(
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
    await Promise.all(
      [...this.running.values()].map((entry) => {
        entry.released = true;
        clearInterval(entry.renewTimer);
        entry.controller.abort(
          new QueueError(
            `queue '${this.queue}': the worker shut down; task '${entry.task.id}' was given back`,
          ),
        );
        return this.giveBack(entry.task);
      }),
    );
    this.blocker?.disconnect();
    this.blocker = undefined;
    this.onClosed();
  }

  /** Returns a task to the queue without counting the attempt. Never rejects. */
  private async giveBack(task: LeasedTask): Promise<void> {
    try {
      await this.backend.release(task);
    } catch (err) {
      // Its lease runs out and a later claim returns it (counting the attempt).
      this.logFailure('release', err);
    }
  }

  private logFailure(operation: string, err: unknown): void {
    const message = err instanceof Error ? err.message : String(err);
    this.failures.warn(`queue '${this.queue}': worker ${operation} failed: ${message}`);
  }
}
