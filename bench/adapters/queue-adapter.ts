/**
 * What the queue shapes need from a queue library, implemented once per library with its
 * default options (ours: results kept per `keepCompleted`, events on; BullMQ: completed jobs
 * kept, events on), unless a row says otherwise (`queue-libraries.ts`).
 */
export interface QueueAdapter {
  /** Adds one job `id` with `payload` to `queue` (the measured operation of the enqueue shape). */
  enqueue(queue: string, id: string, payload: Record<string, unknown>): Promise<void>;
  /**
   * Adds `count` jobs to `queue` as fast as it can (untimed set-up of the drain shapes); with
   * `groups`, job n goes to group `n % groups` (only libraries that have groups).
   */
  fill(queue: string, count: number, groups?: number): Promise<void>;
  /**
   * Runs one consumer of `queue` at `concurrency` whose handler does nothing but return a small
   * result (`jobResult`); resolves as soon as `count` jobs were handled, with the function that
   * stops the consumer, which the caller calls after its timer stopped (closing a worker is not
   * part of a drain's time). Stops the consumer itself before rejecting. `limiter`: the
   * consumer's rate limit.
   */
  drain(queue: string, count: number, concurrency: number, limiter?: Limit): Promise<StopConsumer>;
  /**
   * Starts one consumer of `queue` at `concurrency` that runs `handler` for every job until the
   * returned function stops it; resolves once the consumer is connected. What the handler
   * returns is the job's result; a handler that rejects fails the job.
   */
  work(queue: string, concurrency: number, handler: JobHandler): Promise<StopConsumer>;
  /**
   * Connects what waiting for jobs of `queue` from this process needs (BullMQ: a `QueueEvents`
   * reader; ours: nothing), untimed. `enqueueAndWait` calls it itself when it was not called.
   */
  prepareWaits(queue: string): Promise<void>;
  /**
   * Adds job `id` and waits until a consumer (in any process) completed it: ours
   * `enqueue` + `waitFor`, BullMQ `add` + `job.waitUntilFinished(queueEvents)`. Resolves with the
   * job's result; rejects when it failed or did not finish within `timeoutMs`.
   */
  enqueueAndWait(
    queue: string,
    id: string,
    payload: Record<string, unknown>,
    timeoutMs: number,
  ): Promise<unknown>;
  /**
   * Cancels job `id` from this process, wherever it runs (libraries that can: ours); resolves
   * with the library's answer (ours: `'signalled'` for a running task).
   */
  cancel?(queue: string, id: string): Promise<string>;
  /** Jobs of `queue` leased (running) and cancelled, for the cancel shape's checks. */
  cancelCounts?(queue: string): Promise<{ leased: number; cancelled: number }>;
  /**
   * Runs `flows.count` flows end to end (libraries that have flows): one consumer per queue of
   * `flows.parents` and `flows.children` at `flows.concurrency`, then the flows added with
   * `flows.inFlight` adds at once, each a parent with `flows.children` children (child i in
   * `flows.childQueues[i % 2]`) whose handler reads its children's results; resolves once every
   * parent was handled, with the function that stops the consumers.
   */
  runFlows?(flows: FlowRun): Promise<StopConsumer>;
  /** Closes every connection the adapter opened. */
  close(): Promise<void>;
}

/** What `QueueAdapter.runFlows` runs. */
export interface FlowRun {
  readonly parentQueue: string;
  readonly childQueues: readonly [string, string];
  readonly count: number;
  readonly children: number;
  readonly concurrency: number;
  readonly inFlight: number;
}

/**
 * Adds `count` flows with `add(n)`, at most `inFlight` at once (the flows shape's producers).
 */
export async function addFlows(
  count: number,
  inFlight: number,
  add: (n: number) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) await add(next++);
    }),
  );
}

/**
 * What a consumer started by `QueueAdapter.work` does with one job: `signal` aborts when the job
 * is cancelled (libraries that have cross-process cancel: ours).
 */
export type JobHandler = (job: {
  id: string;
  payload: unknown;
  signal?: AbortSignal;
}) => Promise<unknown>;

/** The result every drain handler returns: small, so that a kept result costs its bookkeeping only. */
export function jobResult(id: string): { done: string } {
  return { done: id };
}

/** A consumer's rate limit: at most `max` jobs per `durationMs`. */
export interface Limit {
  max: number;
  durationMs: number;
}

/** Stops a consumer started by `QueueAdapter.drain` and closes what it opened. */
export type StopConsumer = () => Promise<void>;

/** One row of the queue tables. */
export interface QueueLibrary {
  readonly id: string;
  readonly label: string;
  /** True for this library's own rows. */
  readonly ours: boolean;
  create(url: string): Promise<QueueAdapter>;
}

/** Jobs added concurrently while filling a queue. */
export const FILL_BATCH = 500;

/** Upper bound of one drain, in ms: a consumer that stalls fails the shape instead of hanging. */
export const DRAIN_TIMEOUT_MS = 300_000;

/**
 * Resolves once `tick` has been called with `count` distinct job ids (a job run twice counts
 * once, so a duplicate cannot inflate a rate); rejects after `DRAIN_TIMEOUT_MS`.
 * @example
 * const done = countdown(10_000); worker = start(async (job) => done.tick(job.id));
 * await done.finished;
 */
export function countdown(count: number): { tick(id: string): void; finished: Promise<void> } {
  const seen = new Set<string>();
  let tick = (id: string) => void seen.add(id);
  const finished = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new Error(
            `${count - seen.size} of ${count} jobs not handled within ${DRAIN_TIMEOUT_MS} ms`,
          ),
        ),
      DRAIN_TIMEOUT_MS,
    );
    // A drain that failed otherwise must not keep the process alive.
    timer.unref();
    tick = (id) => {
      if (seen.add(id).size === count) {
        clearTimeout(timer);
        resolve();
      }
    };
  });
  return { tick: (id) => tick(id), finished };
}

/**
 * Waits until `finished` (the last job was handled) and resolves with `stop`, for the caller to
 * call once its timer stopped; when `finished` rejects, calls `stop` itself and rethrows.
 * @example
 * return handedBackAfter(done.finished, () => worker.close());
 */
export async function handedBackAfter(
  finished: Promise<void>,
  stop: StopConsumer,
): Promise<StopConsumer> {
  try {
    await finished;
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
  return stop;
}
