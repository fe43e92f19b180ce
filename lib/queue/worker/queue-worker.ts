import type { Cluster, Redis } from 'ioredis';
import { redactCredentials, redactText } from '../../redaction/redact-credentials';
import type { RedactingLogger } from '../../redaction/redacting-logger';
import { QueueError } from '../../errors/queue.error';
import { TaskCancelledError } from '../../errors/task-cancelled.error';
import { TaskTimeoutError } from '../../errors/task-timeout.error';
import { bounded } from '../../redis/bounded';
import { QueueTracing } from '../../observability/tracing';
import { ThrottledWarning } from '../../redis/throttled-warning';
import type { RedisLockEvents } from '../../events/redis-lock-events';
import type { RedisLockConnection } from '../../redis/redis-connection';
import type {
  QueueBatchHandler,
  QueueHandler,
  QueueWorkerHandle,
} from '../interfaces/queue-options.interface';
import type { LeasedTask } from '../interfaces/task.interface';
import {
  checkDelay,
  checkPayloadBytes,
  logLineJson,
  serializeJson,
  storedPayload,
} from '../queue-arguments';
import type { QueueRedisKeys } from '../queue-keys';
import {
  SETTLED,
  unstartedRelease,
  type ClaimStepResult,
  type QueueStore,
  type SettleStep,
} from '../queue-store';
import type { ResolvedWorkerOptions } from '../queue-worker-options';
import { checkInt, utf8BytesOver } from '../../options/validate';
import {
  MAX_CONCURRENCY,
  MAX_IDLE_MS,
  PASS_ON_DELAY_MS,
  PASS_ON_GRACE_MS,
} from '../queue.constants';
import { errorText } from '../../errors/error-text';
import { encodeTaskError, failureText } from '../task-errors';
import { retryDelayMs, settleFailure } from './failure-policy';
import type { ChildFailure } from '../interfaces/flow.interface';
import { WorkerTask, type TaskControl } from './worker-task';
import type { NamedHandler, NamedHandlers } from './named-handlers';
import {
  clearTimeoutUnfaked,
  setImmediateUnfaked,
  setTimeoutUnfaked,
} from '../../redis/unfaked-ticks';

interface Running {
  readonly task: WorkerTask;
  /** When the handler started (`performance.now()`), for `runMs`. */
  started: number;
  /** When the lease was last extended (or granted), `performance.now()`. */
  renewedAt: number;
  renewing: boolean;
  /** The handler ended, timed out, or the lease was lost: no more renewals. */
  ended: boolean;
  /** Given back (shutdown, `task.delay()`): its outcome must not be acked or nacked. */
  released: boolean;
  /** Given back by its handler with `task.delay()`: `update`/`progress` apply while it waits. */
  delayed?: boolean;
  /**
   * Its `task.delay()` call in flight: `true` once Redis answered it, `false` when it was refused
   * or unanswered (the task is still this worker's: `released` goes back to `false`).
   */
  delaying?: Promise<boolean>;
  /** Claimed, its handler not started yet (a batch filling, a slot of its name awaited). */
  pending: boolean;
  /** When it was claimed, epoch ms by this process's clock (`pastDeadline`). */
  readonly claimedAt: number;
  /** The named handler it was routed to (named handlers). */
  named?: NamedHandler;
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
export class QueueWorkerRunner implements QueueWorkerHandle, TaskControl {
  private readonly running = new Map<string, Running>();
  /** A batch worker's batches whose handler runs now (at most `concurrency`). */
  private batches = 0;
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
  /** Ack-and-claim calls in flight (`flush`). */
  private flushing = 0;
  /** Until when (`performance.now()`) this worker lets others claim first (`passedOn`). */
  private passedOnUntil = 0;
  /** Renews the leases of running tasks: one timer per worker, not one per task. */
  private renewTimer?: NodeJS.Timeout;
  /** Stops listening to the queue's cancels. */
  private unlistenCancels?: Promise<(() => void) | undefined>;
  /**
   * Whether the handler gets its task's `AbortSignal` as a second argument. Creating one costs
   * more than the rest of a task's bookkeeping together (about 5 µs of CPU per task in the bench's
   * drain), so it is made only when read: `task.signal`, or this argument for a handler declared
   * with no parameters or rest parameters (a wrapper's `(...args)`) or two. A handler with exactly
   * one parameter gets `undefined` there, as BullMQ decides for its processors.
   */
  private readonly givesSignal: boolean;

  constructor(
    readonly queue: string,
    private readonly keys: QueueRedisKeys,
    private readonly handler: QueueHandler,
    private readonly options: ResolvedWorkerOptions,
    private readonly backend: QueueStore,
    private readonly connection: RedisLockConnection,
    private readonly logger: RedactingLogger,
    private readonly events: RedisLockEvents,
    private readonly onClosed: () => void,
    /** Named handlers (`process(queue, handler, { name })`): each task runs in its name's. */
    private readonly named?: NamedHandlers,
  ) {
    this.failures = new ThrottledWarning(logger);
    this.givesSignal = handler.length !== 1;
    if (named) {
      named.onSlotsChanged = () => {
        this.options.concurrency = Math.max(1, named.total);
        this.slotFreed?.();
      };
      this.options.concurrency = Math.max(1, named.total);
    }
  }

  /** Starts the claim loop (once), and listens to the queue's cancels. */
  start(): void {
    if (this.loop || this.stop.signal.aborted) return;
    const period = Math.max(1, Math.floor(this.options.leaseMs / 3));
    this.renewTimer = setInterval(() => this.renewDue(period), period);
    this.renewTimer.unref();
    // A cancel whose message is lost (no subscription yet, a reconnect) reaches the task at its
    // next lease extension (extend-lease.lua reports it).
    this.unlistenCancels = this.connection.hub
      .listen(this.keys.cancelChannel, (message) => {
        // '<cancel JSON>\n<id>' (cancel.lua)
        const at = message.indexOf('\n');
        this.cancelled(message.slice(at + 1), cancelReasonOf(message.slice(0, at)));
      })
      .catch((err: unknown) => {
        this.logFailure('SUBSCRIBE (cancels)', err);
        return undefined;
      });
    this.loop = this.run();
  }

  /** A cancel was asked for task `id`: aborts its signal if it runs here. */
  private cancelled(id: string, reason?: string): void {
    for (const entry of this.running.values()) {
      if (entry.task.id === id && !entry.ended && !entry.released) {
        entry.task.abort(new TaskCancelledError(this.queue, id, reason));
        // Waiting for a slot of its name, it has no handler to stop: it is settled now.
        if (entry.pending && entry.named) this.named?.withdraw(entry.named, entry);
      }
    }
  }

  /** Tasks (for a batch worker: batches) it runs at the same time. */
  get concurrency(): number {
    return this.options.concurrency;
  }

  /**
   * @internal tasks (batches: their tasks) its handlers run now (the workers registry): not those
   * claimed and still waiting for their batch to fill or for a slot of their name
   */
  get runningCount(): number {
    let n = 0;
    for (const entry of this.running.values()) if (!entry.pending) n++;
    return n;
  }

  /** @internal the handles of its named handlers (one per name), or none: not a named loop */
  get namedHandles(): QueueWorkerHandle[] | undefined {
    return this.named?.namedHandles;
  }

  /** @internal the task names it handles (named handlers); empty: every task */
  get names(): readonly string[] {
    return this.named?.names ?? [];
  }

  /**
   * Changes `concurrency` while it runs: a higher one claims more at once (a worker waiting for a
   * free slot looks again now); a lower one lets running tasks finish and claims again only
   * below it.
   * @throws RedisLockOptionsError unless `n` is an integer from 1 to 10,000
   */
  setConcurrency(n: number): void {
    this.options.concurrency = checkInt('concurrency', n, 1, MAX_CONCURRENCY);
    this.slotFreed?.();
  }

  close(): Promise<void> {
    this.closed ??= this.shutdown();
    return this.closed;
  }

  private async run(): Promise<void> {
    const batchSize = this.options.batch?.size;
    while (!this.stop.signal.aborted) {
      if (batchSize !== undefined) {
        // A batch worker runs `concurrency` batches: a new one fills once one of them ended.
        if (this.batches >= this.options.concurrency) {
          await this.waitForSlot();
        } else {
          await this.collectBatch(batchSize, this.options.batch?.maxWaitMs ?? 0);
        }
        continue;
      }
      const free = this.options.concurrency - this.running.size;
      if (free <= 0) {
        await this.waitForSlot();
        continue;
      }
      let batch: ClaimStepResult<unknown>;
      try {
        batch = await this.backend.claim(this.queue, free, this.options, [], undefined, this.late);
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
   * Claims up to `size` tasks for one batch: when fewer are ready, waits for more (on the wake-up
   * list, as an idle worker does) until `maxWaitMs` after the first arrived, then runs what it has.
   * With nothing ready it idles as usual. Each task is held (its lease renewed) from its claim on:
   * a batch may wait longer for its last task than the first one's lease lasts.
   */
  private async collectBatch(size: number, maxWaitMs: number): Promise<void> {
    const held: Running[] = [];
    let deadline: number | undefined;
    while (!this.stop.signal.aborted) {
      let step: ClaimStepResult<unknown>;
      try {
        step = await this.backend.claim(
          this.queue,
          size - held.length,
          this.options,
          [],
          undefined,
          this.late,
        );
        this.errorPause = 0;
      } catch (err) {
        this.logFailure('claim', err);
        if (held.length > 0) break;
        await this.pauseAfterError();
        return;
      }
      for (const t of step.tasks) held.push(this.hold(t));
      if (held.length >= size) break;
      if (held.length > 0) deadline ??= performance.now() + maxWaitMs;
      const left = deadline === undefined ? step.nextInMs : deadline - performance.now();
      if (deadline !== undefined && left <= 0) break;
      try {
        await this.idle(
          step.nextInMs < 0 || deadline === undefined ? left : Math.min(left, step.nextInMs),
        );
      } catch (err) {
        this.logFailure('BLPOP', err);
        await this.pauseAfterError();
      }
      if (held.length === 0) return;
    }
    if (this.stop.signal.aborted) {
      for (const entry of held) this.running.delete(entry.task.leaseToken);
      await this.giveBack(held.map((entry) => entry.task));
    } else if (held.length > 0) {
      this.startBatch(held);
    }
  }

  /**
   * Runs a batch worker's handler on the tasks of `held`: one entry per task, one call for all.
   * A task whose lease was lost while the batch filled (its renewal was refused) is left out; one
   * cancelled meanwhile (its signal aborted) is not run either: it is settled with the cancel,
   * as a named handler's task cancelled while it waits for a slot.
   */
  private startBatch(held: Running[]): void {
    const entries: Running[] = [];
    const late: Running[] = [];
    for (const entry of held) {
      if (entry.ended) {
        this.running.delete(entry.task.leaseToken);
      } else if (pastDeadline(entry)) {
        late.push(entry);
      } else if (entry.task.aborted) {
        entry.ended = true;
        entry.done = this.finish(
          entry.task,
          0,
          { error: entry.task.signal.reason },
          undefined,
        ).finally(() => this.running.delete(entry.task.leaseToken));
      } else {
        entries.push(entry);
      }
    }
    if (late.length > 0) {
      const done = this.giveBackLate(late).finally(() => {
        for (const e of late) this.running.delete(e.task.leaseToken);
      });
      for (const e of late) e.done = done;
    }
    if (entries.length === 0) {
      this.slotFreed?.();
      return;
    }
    const started = performance.now();
    for (const entry of entries) {
      entry.started = started;
      entry.pending = false;
    }
    this.batches++;
    const done = this.executeBatch(entries).finally(() => {
      this.batches--;
      for (const e of entries) this.running.delete(e.task.leaseToken);
      this.slotFreed?.();
    });
    for (const e of entries) e.done = done;
  }

  /**
   * A batch worker's handler on every task of `entries`, then each task's ack or nack (its own
   * `task.fail`, else the handler's failure) for the next flush. Never rejects.
   */
  private async executeBatch(entries: Running[]): Promise<void> {
    const tasks = entries.map((e) => e.task);
    let failure: { error: unknown } | undefined;
    let results: unknown;
    try {
      const run = Promise.resolve().then(() =>
        (this.handler as unknown as QueueBatchHandler)(tasks),
      );
      const timeoutMs = this.options.timeoutMs;
      results = timeoutMs === undefined ? await run : await this.bounded(entries, run, timeoutMs);
    } catch (error) {
      failure = { error };
    }
    const runMs = performance.now() - entries[0].started;
    const each = Array.isArray(results) && results.length === tasks.length ? results : undefined;
    const settle = (entry: Running, i: number) =>
      this.finish(entry.task, runMs, entry.task.failure ?? failure, each?.[i]);
    await Promise.all(
      entries.map((entry, i) => {
        entry.ended = true;
        if (!entry.released) return settle(entry, i);
        // A `task.delay()` still in flight that Redis refuses leaves the task this worker's.
        return entry.delaying?.then((held) => (held ? undefined : settle(entry, i)));
      }),
    );
  }

  /** Queues the ack (with `result`) or nack of `task` for the next flush; resolves once flushed. */
  private finish(
    task: WorkerTask,
    runMs: number,
    failed: { error: unknown } | undefined,
    result: unknown,
  ): Promise<void> {
    let failure = failed;
    let step: SettleStep | undefined;
    if (!failure) {
      try {
        step = {
          kind: 'ack',
          task,
          data: result === undefined ? '' : this.resultJson(task, result),
          runMs,
        };
      } catch (error) {
        failure = { error };
      }
    }
    try {
      step ??= settleFailure(task, failure!.error, this.options);
    } catch (err) {
      // A backstop: whatever the handler threw, its task is nacked (a throw here would be an
      // unhandled rejection and leave the task to its lease's expiry).
      step = {
        kind: 'nack',
        task,
        data: encodeTaskError(
          new QueueError(
            `queue '${this.queue}': task '${task.id}' failed with a value that could not be stored: ${errorText(err)}`,
          ),
        ),
        delayMs: retryDelayMs(this.options.backoffMs, task.attempt),
      };
    }
    return new Promise<void>((resolve) => {
      this.finished.push({ step: step!, runMs, failure, resolve });
      if (this.finished.length === 1) setImmediateUnfaked(() => void this.flush());
    });
  }

  /**
   * Blocks on the wake-up list for `nextInMs` (-1: nothing due or leased) at most. Resolves
   * early on a marker or on close.
   */
  private async idle(nextInMs: number): Promise<void> {
    if (this.stop.signal.aborted) return;
    let ms = Math.min(MAX_IDLE_MS, nextInMs < 0 ? MAX_IDLE_MS : Math.max(MIN_IDLE_MS, nextInMs));
    // Soon after a pass-on, the workers that run the name claim first (PASS_ON_GRACE_MS).
    if (nextInMs >= 0 && performance.now() < this.passedOnUntil) {
      ms = Math.min(MAX_IDLE_MS, ms + PASS_ON_GRACE_MS);
    }
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
    if (this.stop.signal.aborted) this.dropBlocker(blocker);
  }

  /**
   * Closing: the BLPOP would stay blocked in Redis while running tasks drain and take the marker
   * of an enqueue meant for a worker that stays, so its connection is closed now. (A marker it
   * took in the same moment is not put back: the other idle workers find that task at the end of
   * their bounded wait, `MAX_IDLE_MS`.)
   */
  private dropBlocker(blocker: Redis | Cluster): void {
    if (this.blocker === blocker) this.blocker = undefined;
    blocker.disconnect();
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

  private startTask(leased: LeasedTask): void {
    const entry = this.hold(leased);
    entry.done = this.execute(entry).finally(() => {
      this.running.delete(entry.task.leaseToken);
      this.slotFreed?.();
    });
  }

  /** A task just leased to this worker: counted as running and its lease renewed from now on. */
  private hold(leased: LeasedTask): Running {
    const now = performance.now();
    const entry: Running = {
      task: new WorkerTask(leased, this),
      started: now,
      renewedAt: now,
      renewing: false,
      ended: false,
      released: false,
      pending: true,
      claimedAt: Date.now(),
    };
    this.running.set(entry.task.leaseToken, entry);
    return entry;
  }

  /**
   * Runs the handler (bounded by the run timeout, if any), then queues its ack or nack for the
   * next flush. Resolves once that is done and the tasks claimed in its place run (so the claim
   * loop never claims for this slot too). Never rejects.
   */
  private async execute(entry: Running): Promise<void> {
    const { task } = entry;
    let failure: { error: unknown } | undefined;
    let result: unknown;
    let named: NamedHandler | undefined;
    try {
      let handler = this.handler;
      let givesSignal = this.givesSignal;
      let timeoutMs = task.options?.timeoutMs ?? this.options.timeoutMs;
      if (this.named) {
        named = this.named.route(task);
        if (!named) {
          if (await this.passedOn(entry)) return;
          throw this.named.unknownName(task);
        }
        entry.named = named;
        // No await when the name has a free slot (the common case): a promise per task costs.
        const took = this.named.take(named, this.stop.signal.aborted, entry);
        if (took !== true) {
          if (!(await this.namedSlot(entry, named, took))) {
            named = undefined;
            return;
          }
          if (pastDeadline(entry)) {
            await this.giveBackLate([entry]);
            return;
          }
        }
        ({ handler, givesSignal } = named);
        timeoutMs = task.options?.timeoutMs ?? named.timeoutMs ?? this.options.timeoutMs;
      }
      entry.pending = false;
      const run = this.tracing.process(this.queue, task, () =>
        handler(task, (givesSignal ? task.signal : undefined) as AbortSignal),
      );
      result = timeoutMs === undefined ? await run : await this.bounded([entry], run, timeoutMs);
    } catch (error) {
      failure = { error };
    } finally {
      if (named) this.named!.release(named);
    }
    entry.ended = true;
    // Given back, unless by a `task.delay()` still in flight that Redis then refuses: the task is
    // still this worker's, settled here (with its `TaskTimeoutError` when the timeout came first).
    if (entry.released && (await entry.delaying) !== false) return;
    await this.finish(task, performance.now() - entry.started, task.failure ?? failure, result);
  }

  /**
   * A task whose name no handler here runs: given back, due `PASS_ON_DELAY_MS` later and its
   * attempt not counted, when a live worker elsewhere runs that name (the workers registry) — in a
   * rolling deploy the old instances leave a new name's tasks to the new ones instead of burying
   * them. `false` when none does: the task ends dead (`UnknownTaskNameError`), so a misspelt name
   * does not go round the instances unseen. A registry that cannot be read counts as "one does",
   * and so does one whose entries were lost or may have been (a Redis restart, a reconnect: for a
   * while, see `WorkerRegistry.handles`): nothing is buried on a guess.
   */
  private async passedOn(entry: Running): Promise<boolean> {
    const { task } = entry;
    const elsewhere = await this.named!.handledElsewhere(task.name).catch(() => true);
    if (!elsewhere) return false;
    entry.released = true;
    this.logger.debug(
      `queue '${this.queue}': task '${task.id}' (${task.name === undefined ? 'no name' : `name '${task.name}'`}) ` +
        `left to the workers that handle it, due in ${PASS_ON_DELAY_MS} ms`,
    );
    // A give-back refused or unanswered: the task stays this worker's (its lease renewed) and is
    // given back again after a pause, until that holds or the lease is lost (a give-back Redis
    // ran late); once the worker closes, tried once more.
    while (!(await this.giveBack([task], PASS_ON_DELAY_MS)) && !this.stop.signal.aborted) {
      entry.released = false;
      await this.pauseAfterError();
      if (entry.ended) return true;
      entry.released = true;
    }
    this.passedOnUntil = performance.now() + PASS_ON_DELAY_MS + PASS_ON_GRACE_MS;
    return true;
  }

  /**
   * Waits for a run slot of the task's named handler (`took`: `NamedHandlers.take`'s promise; the
   * task's lease is renewed meanwhile, as a running task's). `false` (no slot taken) when the task
   * must not run: the worker stops (the task is given back), its lease was lost, or it was
   * cancelled while it waited (`cancelled` took it out of the line: settled with the cancel).
   */
  private async namedSlot(
    entry: Running,
    named: NamedHandler,
    took: Promise<boolean>,
  ): Promise<boolean> {
    if (!(await took)) {
      if (entry.task.aborted && !entry.ended && !entry.released) {
        entry.ended = true;
        await this.finish(entry.task, 0, { error: entry.task.signal.reason }, undefined);
        return false;
      }
      entry.released = true;
      await this.giveBack([entry.task]);
      return false;
    }
    entry.started = performance.now();
    if (entry.ended || entry.released) {
      this.named!.release(named);
      return false;
    }
    // The slot stays taken: `execute` gives it back once this failure is settled.
    if (entry.task.aborted) throw entry.task.signal.reason;
    return true;
  }

  /**
   * `run` (what the handler returned: a promise or a value), or a `TaskTimeoutError` once
   * `timeoutMs` passed: the signal aborts with it, and the attempt fails at once (the slot is free
   * again; what the handler does later is ignored). Each task fails with its own error (`fail`):
   * its `TaskTimeoutError`, or the reason its signal aborted with before (a cancel, a lost lease),
   * which is no timeout and has no `task.timeout` event.
   */
  private bounded(entries: Running[], run: unknown, timeoutMs: number): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        let first: unknown;
        for (const entry of entries) {
          // Given back (`task.delay()`, a drain): its outcome is not settled here. A delay still
          // in flight may yet be refused, the task then still this worker's: it times out as usual.
          if (entry.released && entry.delaying === undefined) continue;
          if (entry.task.aborted) {
            const why = entry.task.signal.reason as unknown;
            entry.task.fail(why);
            first ??= why;
            continue;
          }
          const error = new TaskTimeoutError(this.queue, entry.task.id, timeoutMs);
          first ??= error;
          entry.task.fail(error);
          entry.task.abort(error);
          if (this.events.hasListeners('task.timeout')) {
            this.events.emit('task.timeout', {
              queue: this.queue,
              id: entry.task.id,
              ...(entry.task.name === undefined ? {} : { name: entry.task.name }),
              attempt: entry.task.attempt,
              runMs: performance.now() - entry.started,
              timeoutMs,
            });
          }
        }
        reject(first);
      }, timeoutMs);
    });
    // The handler may still settle after the timeout: nobody waits for it then.
    const running = Promise.resolve(run);
    running.catch(() => undefined);
    return Promise.race([running, timedOut]).finally(() => clearTimeout(timer));
  }

  /** The JSON of a handler's result; throws a `QueueError` naming the task past its bounds. */
  private resultJson(task: LeasedTask, result: unknown): string {
    let json: string;
    try {
      json = serializeJson('result', result);
    } catch (err) {
      throw new QueueError(
        `queue '${this.queue}': task '${task.id}' returned a result that is not JSON: ${errorText(err)}`,
        'result',
      );
    }
    const max = this.options.maxResultBytes;
    const bytes = utf8BytesOver(json, max);
    if (bytes !== undefined) {
      throw new QueueError(
        `queue '${this.queue}': task '${task.id}' returned a result of ${bytes} bytes; ` +
          `the limit is ${max} (module option queue.maxResultBytes)`,
        'result',
      );
    }
    return json;
  }

  /** `task.progress(value)`. */
  async progress(task: WorkerTask, value: unknown): Promise<void> {
    const json = this.sized(task, 'progress', serializeJson('progress', value));
    await this.updateTask(task, 'progress', json);
  }

  /** `task.log(line)`. */
  async log(task: WorkerTask, line: string): Promise<void> {
    const json = this.sized(task, 'line', logLineJson(line));
    if (!(await this.backend.log(task, json))) throw this.leaseLost(task);
  }

  /** `task.update(payload)`. */
  async update(task: WorkerTask, payload: unknown): Promise<void> {
    const json = this.sized(task, 'payload', serializeJson('payload', payload));
    await this.updateTask(task, 'payload', storedPayload(json, task.traceparent) ?? json);
    task.payload = payload;
  }

  /** `json`, unless it is past the queue's `maxPayloadBytes` (`PayloadTooLargeError`). */
  private sized(task: WorkerTask, argument: string, json: string): string {
    return checkPayloadBytes(this.options, this.queue, argument, json, `task '${task.id}'`);
  }

  private async updateTask(task: WorkerTask, what: 'progress' | 'payload', json: string) {
    const delayed = this.running.get(task.leaseToken)?.delayed === true;
    if (await this.backend.updateTask(task, what, json, delayed)) return;
    if (!delayed) throw this.leaseLost(task);
    throw new QueueError(
      `queue '${this.queue}': task '${task.id}' was given back with task.delay() and has been ` +
        `claimed or has finished since; change its ${what} before task.delay(), or delay it longer`,
    );
  }

  /** `task.childResults()`. */
  childResults(task: WorkerTask): Promise<Record<string, unknown>> {
    return this.backend.flows.childResults(task);
  }

  /** `task.childFailures()`. */
  childFailures(task: WorkerTask): Promise<ChildFailure[]> {
    return this.backend.flows.childFailures(task);
  }

  /** `task.delay(ms)`: gives the task back, due in `ms`, without counting the attempt. */
  async delay(task: WorkerTask, ms: number): Promise<void> {
    const delayMs = checkDelay('ms', ms);
    const entry = this.running.get(task.leaseToken);
    if (!entry || entry.released || entry.ended) throw this.leaseLost(task);
    entry.released = true;
    entry.delayed = true;
    const call = this.backend.claim(this.queue, 0, this.options, [
      { kind: 'release', task, delayMs },
    ]);
    // The run timeout or the handler's end may come while the call is in flight: `execute` waits
    // for it then, as a refused delay leaves the task this worker's to settle.
    entry.delaying = call.then(
      () => true,
      () => false,
    );
    let settled: number[];
    try {
      ({ settled } = await call);
    } catch (err) {
      // Refused or unanswered: the task is still this worker's, renewed and settled by what its
      // handler does next, or by its run timeout (when Redis ran it after all, that settle finds
      // the lease stale).
      entry.released = false;
      entry.delayed = undefined;
      throw err;
    } finally {
      entry.delaying = undefined;
    }
    if (settled[0] === SETTLED.stale) throw this.leaseLost(task);
  }

  private leaseLost(task: LeasedTask): QueueError {
    return new QueueError(
      `queue '${this.queue}': lease of task '${task.id}' was lost (it expired and was returned ` +
        'to the queue or claimed by another worker)',
    );
  }

  /**
   * Acks and nacks every task finished since the last flush and claims as many in their place, in
   * one round trip: under load, a flush settles every handler that ended in one turn of the event
   * loop. When no other flush is in flight, a flush of several tasks goes out as two calls sent
   * together: Redis runs the second while this process starts the tasks of the first, so the two
   * work side by side (with short handlers a worker otherwise waits for Redis, then Redis for it).
   */
  private async flush(): Promise<void> {
    const batch = this.finished;
    this.finished = [];
    // The flushed tasks still count in `running`; after a lowered `setConcurrency`, fewer than
    // them are claimed in their place.
    const room =
      this.stop.signal.aborted || this.options.batch
        ? 0 // a batch worker's claim loop claims whole batches itself
        : Math.max(
            0,
            Math.min(batch.length, this.options.concurrency - this.running.size + batch.length),
          );
    if (this.flushing > 0 || batch.length < 2 || room < 2) {
      await this.settle(batch, room);
      return;
    }
    const half = Math.ceil(batch.length / 2);
    const firstRoom = Math.min(half, room);
    await Promise.all([
      this.settle(batch.slice(0, half), firstRoom),
      this.settle(batch.slice(half), room - firstRoom),
    ]);
  }

  /** One ack-and-claim call: settles `batch` and claims up to `room` tasks in their place. */
  private async settle(batch: FinishedTask[], room: number): Promise<void> {
    this.flushing++;
    let result: ClaimStepResult<unknown> | undefined;
    try {
      result = await this.backend.claim(
        this.queue,
        room,
        this.options,
        batch.map((f) => f.step),
        undefined,
        this.late,
      );
    } catch (err) {
      // The leases run out and the tasks come back: at-least-once holds without this call.
      this.logFailure(batch.some((f) => f.failure) ? 'nack' : 'ack', err);
    } finally {
      this.flushing--;
    }
    if (result) {
      if (this.stop.signal.aborted) await this.giveBack(result.tasks);
      else for (const t of result.tasks) this.startTask(t);
      // Acks too few replicas acknowledged: said as a failed ack is, with no events for them.
      if (result.shortfall) this.logFailure('ack', result.shortfall);
      else batch.forEach((f, i) => this.report(f, result.settled[i]));
    }
    for (const f of batch) f.resolve();
  }

  /** Logs the outcome of a finished task and emits its events. */
  private report(finished: FinishedTask, settled: number): void {
    const { step, runMs, failure } = finished;
    const { task, delayMs = 0 } = step;
    const reason = failure && failureText(failure.error);
    const base = () => ({
      queue: this.queue,
      id: task.id,
      ...(task.name === undefined ? {} : { name: task.name }),
      attempt: task.attempt,
      runMs,
      ...(task.enqueuedAt === undefined
        ? {}
        : { waitMs: task.leaseExpiresAt - this.options.leaseMs - task.enqueuedAt }),
    });
    if (settled === SETTLED.cancelled) {
      this.logger.log(`queue '${this.queue}': task '${task.id}' was cancelled`);
      if (this.events.hasListeners('task.cancelled')) {
        // The cancel this worker received has the reason, whatever the handler threw after it.
        const told =
          task instanceof WorkerTask && task.aborted ? cancelReason(task.signal.reason) : undefined;
        this.events.emit('task.cancelled', {
          ...base(),
          reason: told ?? cancelReason(failure?.error),
        });
      }
      return;
    }
    if (step.kind === 'release') {
      // A QueueRateLimitError: the task is back, unspent; the queue waits (claim.lua).
      this.logger.debug(
        `queue '${this.queue}': task '${task.id}' given back, queue rate-limited for ${step.data} ms`,
      );
      return;
    }
    if (settled === SETTLED.stale) {
      // The nack or ack changed nothing: the task is another worker's now, or back in the queue.
      // No event: a `task.failed` would be followed by neither `task.retried` nor `task.dead`.
      this.logger.warn(
        `queue '${this.queue}': task '${task.id}' ${failure ? `failed (${reason})` : 'finished'} ` +
          'after its lease was lost; another worker may run it again',
      );
      return;
    }
    if (!failure) {
      if (this.events.hasListeners('task.completed')) this.events.emit('task.completed', base());
      return;
    }
    if (this.events.hasListeners('task.failed')) {
      this.events.emit('task.failed', { ...base(), error: redactedError(failure.error) });
    }
    const maxAttempts = task.options?.maxAttempts ?? this.options.maxAttempts;
    if (settled === SETTLED.dead) {
      this.logger.error(
        step.kind === 'fail'
          ? `queue '${this.queue}': task '${task.id}' failed attempt ${task.attempt} with an ` +
              `unrecoverable error and moved to dead letter: ${reason}`
          : `queue '${this.queue}': task '${task.id}' failed attempt ${task.attempt} of ` +
              `${maxAttempts} and moved to dead letter: ${reason}`,
      );
      if (this.events.hasListeners('task.dead')) {
        this.events.emit('task.dead', { ...base(), error: redactedError(failure.error) });
      }
    } else if (settled === 1) {
      const level = this.options.retryLogLevel;
      if (level !== 'off') {
        this.logger[level](
          `queue '${this.queue}': task '${task.id}' failed attempt ${task.attempt} of ` +
            `${maxAttempts}, retrying in ${delayMs} ms: ${reason}`,
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

  private async renew(entry: Running, now: number): Promise<void> {
    if (entry.renewing || entry.released || entry.ended) return;
    entry.renewing = true;
    try {
      const { held, cancel } = await this.backend.extendLease(entry.task, this.options.leaseMs);
      if (held) {
        entry.renewedAt = now;
        if (cancel) this.cancelled(entry.task.id, cancelReasonOf(cancel));
      } else if (!entry.released && !entry.ended) {
        entry.ended = true;
        entry.task.abort(this.leaseLost(entry.task));
      }
    } catch (err) {
      this.logFailure('extendLease', err);
    } finally {
      entry.renewing = false;
    }
  }

  private async shutdown(): Promise<void> {
    this.stop.abort();
    this.named?.stopWaiting();
    this.slotFreed?.();
    await this.loop;
    await this.drain(() => [...this.running.values()], 'the worker shut down');
    clearInterval(this.renewTimer);
    (await this.unlistenCancels)?.();
    this.blocker?.disconnect();
    this.blocker = undefined;
    this.onClosed();
  }

  /**
   * The handler of name `named` was closed while the loop goes on: its running tasks drain as at
   * shutdown (its tasks waiting for a slot were given back already: `NamedHandlers.remove`).
   */
  async drainName(named: NamedHandler): Promise<void> {
    const own = () => [...this.running.values()].filter((e) => e.named === named);
    await this.drain(own, `the handler of name '${named.name}' was closed`);
  }

  /**
   * Waits up to `drainTimeoutMs` for the running tasks `entries()` lists, then gives back those
   * still running, unattempted, their signals aborted with `why`.
   */
  private async drain(entries: () => Running[], why: string): Promise<void> {
    const inFlight = entries();
    if (inFlight.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(inFlight.map((e) => e.done)),
        new Promise<void>(
          (resolve) => (timer = setTimeoutUnfaked(resolve, this.options.drainTimeoutMs)),
        ),
      ]);
      clearTimeoutUnfaked(timer);
    }
    // Every handler still running is told; a task given back already (task.delay()) is not
    // given back twice.
    const left = entries();
    const back = left.filter((entry) => !entry.released);
    for (const entry of left) {
      entry.released = true;
      entry.task.abort(
        new QueueError(`queue '${this.queue}': ${why}; task '${entry.task.id}' was given back`),
      );
    }
    // Those whose handler started keep their start in the limiters; the others take it back.
    const tasks = back.map((entry) => entry.task);
    const started = new Set(back.filter((entry) => !entry.pending).map((entry) => entry.task));
    if (!(await this.giveBack(tasks, 0, started))) {
      // Refused or unanswered: still this worker's, settled by what their handlers do next.
      for (const entry of back) entry.released = false;
      return;
    }
    // No longer this worker's: their slots are free now, not when their handlers return (a
    // closed name's handler that ignores its signal would hold the loop's slots of the names
    // that stay). A task given back by `task.delay()` stays: its `update`/`progress` still apply.
    for (const entry of back) this.running.delete(entry.task.leaseToken);
    if (back.length > 0) this.slotFreed?.();
  }

  /**
   * Tasks whose deadline (`expiresAt`) passed while they waited here for their handler (a slot of
   * their name, a batch filling): they must not run. Given back unattempted, they are ended
   * `expired` by the claim that finds them (claim.lua checks every deadline it leases).
   */
  private async giveBackLate(entries: Running[]): Promise<void> {
    for (const entry of entries) {
      entry.released = true;
      entry.ended = true;
    }
    await this.giveBack(entries.map((entry) => entry.task));
  }

  /**
   * The reply of a claim (or ack-and-claim) that came after `commandTimeoutMs`: the worker gave
   * up on it and claimed again, but Redis ran it after all (once a stall ended, or from ioredis's
   * offline queue after a reconnect), so its tasks are leased to nobody. An outage leaves one
   * such claim per retry. They go straight back, unattempted, to be claimed at once, instead of
   * waiting out `leaseMs` and coming back with an attempt used (with `maxAttempts: 1`, dead
   * "lease expired" without having run). Also once the worker is closed (best effort, bounded).
   * One function per worker: the claims pass it without allocating anything.
   */
  private readonly late = (reply: unknown): void => {
    // The module closed meanwhile: nothing can be sent; the leases run out as before.
    if (this.connection.closed) return;
    let tasks: LeasedTask[];
    try {
      tasks = this.backend.leasedBy(this.queue, reply, this.options.leaseMs);
    } catch (err) {
      this.logFailure('release', err);
      return;
    }
    if (tasks.length === 0) return;
    this.logger.debug(
      `queue '${this.queue}': ${tasks.length} task(s) leased by a claim answered after ` +
        `${this.connection.options.commandTimeoutMs} ms given back`,
    );
    void this.giveBack(tasks);
  };

  /**
   * Returns tasks to the queue without counting the attempt, in one call; those not in `started`
   * (their handler never ran) without counting their start in the limiters either. Never
   * rejects: false when the call failed.
   */
  private async giveBack(
    tasks: readonly LeasedTask[],
    delayMs = 0,
    started?: ReadonlySet<LeasedTask>,
  ): Promise<boolean> {
    if (tasks.length === 0) return true;
    try {
      const steps = tasks.map((task): SettleStep =>
        started?.has(task) ? { kind: 'release', task, delayMs } : unstartedRelease(task, delayMs),
      );
      await this.backend.claim(this.queue, 0, this.options, steps);
      return true;
    } catch (err) {
      // Unless the caller keeps them, their leases run out and a later claim returns them
      // (counting the attempt).
      this.logFailure('release', err);
      return false;
    }
  }

  private logFailure(operation: string, err: unknown): void {
    this.failures.warn(`queue '${this.queue}': worker ${operation} failed: ${errorText(err)}`);
    if (this.events.hasListeners('worker.error')) {
      this.events.emit('worker.error', { queue: this.queue, operation, error: err });
    }
  }
}

/**
 * Whether the task's own deadline (`expiresAt`, epoch ms) passed since it was claimed, by this
 * process's clock. One already past at the claim by this clock was not by Redis's (the claim
 * would have expired it): this clock is ahead, and Redis's decision stands.
 */
function pastDeadline(entry: Running): boolean {
  const deadline = entry.task.options?.expiresAt;
  return deadline !== undefined && deadline > entry.claimedAt && Date.now() >= deadline;
}

/**
 * `err` without credentials for an event (`redactCredentials`); an error whose properties cannot be
 * read (a getter that throws) becomes a plain `Error` of its text, so that the event is still sent.
 */
function redactedError(err: unknown): unknown {
  try {
    return redactCredentials(err);
  } catch {
    return new Error(redactText(errorText(err)));
  }
}

/** The reason given to `cancel()`, from the cancel's stored JSON (`{ name, message, reason? }`). */
function cancelReasonOf(json: string): string | undefined {
  try {
    const { reason } = JSON.parse(json) as { reason?: unknown };
    return typeof reason === 'string' ? reason : undefined;
  } catch {
    return undefined;
  }
}

function cancelReason(err: unknown): string | undefined {
  return err instanceof TaskCancelledError ? err.reason : undefined;
}
