import type { ChildFailure } from '../interfaces/flow.interface';
import type { LeasedTask, RunningTask, TaskOwnOptions } from '../interfaces/task.interface';

/** What a `WorkerTask` asks its worker to do (queue-worker.ts). */
export interface TaskControl {
  progress(task: WorkerTask, value: unknown): Promise<void>;
  log(task: WorkerTask, line: string): Promise<void>;
  update(task: WorkerTask, payload: unknown): Promise<void>;
  delay(task: WorkerTask, ms: number): Promise<void>;
  childResults(task: WorkerTask): Promise<Record<string, unknown>>;
  childFailures(task: WorkerTask): Promise<ChildFailure[]>;
}

/**
 * The `RunningTask` a handler gets. Its `signal` is made on first use (an `AbortController` per
 * task costs more CPU than the rest of a task's bookkeeping, and most handlers never read it); an
 * abort before that is remembered and applied when the signal is made.
 */
export class WorkerTask<P = unknown> implements RunningTask<P> {
  readonly queue: string;
  readonly id: string;
  readonly score: number;
  payload: P;
  readonly leaseToken: string;
  readonly attempt: number;
  readonly leaseExpiresAt: number;
  readonly fence: number;
  readonly enqueuedAt?: number;
  readonly traceparent?: string;
  readonly options?: TaskOwnOptions;
  readonly name?: string;
  readonly parent?: { readonly queue: string; readonly id: string };
  /** Set by `fail(error)`: the attempt fails with it. */
  failure?: { error: unknown };
  private controller?: AbortController;
  private abortReason?: { reason: unknown };

  constructor(
    t: LeasedTask<P>,
    private readonly control: TaskControl,
  ) {
    this.queue = t.queue;
    this.id = t.id;
    this.score = t.score;
    this.payload = t.payload;
    this.leaseToken = t.leaseToken;
    this.attempt = t.attempt;
    this.leaseExpiresAt = t.leaseExpiresAt;
    this.fence = t.fence;
    if (t.enqueuedAt !== undefined) this.enqueuedAt = t.enqueuedAt;
    if (t.traceparent !== undefined) this.traceparent = t.traceparent;
    if (t.options !== undefined) this.options = t.options;
    if (t.name !== undefined) this.name = t.name;
    if (t.parent !== undefined) this.parent = t.parent;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortReason) this.controller.abort(this.abortReason.reason);
    }
    return this.controller.signal;
  }

  /** Whether the signal aborted (or will abort when made). */
  get aborted(): boolean {
    return this.abortReason !== undefined;
  }

  /** Aborts the signal with `reason` (once; later reasons are ignored). */
  abort(reason: unknown): void {
    if (this.abortReason) return;
    this.abortReason = { reason };
    this.controller?.abort(reason);
  }

  progress(value: unknown): Promise<void> {
    return this.control.progress(this as WorkerTask, value);
  }

  log(line: string): Promise<void> {
    return this.control.log(this as WorkerTask, line);
  }

  update(payload: P): Promise<void> {
    return this.control.update(this as WorkerTask, payload);
  }

  delay(ms: number): Promise<void> {
    return this.control.delay(this as WorkerTask, ms);
  }

  fail(error: unknown): void {
    this.failure ??= { error };
  }

  childResults<R = unknown>(): Promise<Record<string, R>> {
    return this.control.childResults(this as WorkerTask) as Promise<Record<string, R>>;
  }

  childFailures(): Promise<ChildFailure[]> {
    return this.control.childFailures(this as WorkerTask);
  }
}
