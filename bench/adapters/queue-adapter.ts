/**
 * What the queue shapes need from a queue library, implemented once per library with its
 * default options (BullMQ: jobs added with `removeOnComplete`).
 */
export interface QueueAdapter {
  /** Adds one job `id` with `payload` to `queue` (the measured operation of the enqueue shape). */
  enqueue(queue: string, id: string, payload: Record<string, unknown>): Promise<void>;
  /** Adds `count` jobs to `queue` as fast as it can (untimed set-up of the drain shapes). */
  fill(queue: string, count: number): Promise<void>;
  /**
   * Runs one consumer of `queue` at `concurrency` with a no-op handler until `count` jobs were
   * handled, then stops it.
   */
  drain(queue: string, count: number, concurrency: number): Promise<void>;
  /** Closes every connection the adapter opened. */
  close(): Promise<void>;
}

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
 * Resolves once `counter()` has been called `count` times; rejects after `DRAIN_TIMEOUT_MS`.
 * @example
 * const done = countdown(10_000); worker = start(async () => done.tick());
 * await done.finished;
 */
export function countdown(count: number): { tick(): void; finished: Promise<void> } {
  let left = count;
  let tick = () => undefined as void;
  const finished = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${left} of ${count} jobs not handled within ${DRAIN_TIMEOUT_MS} ms`)),
      DRAIN_TIMEOUT_MS,
    );
    tick = () => {
      if (--left === 0) {
        clearTimeout(timer);
        resolve();
      }
    };
  });
  return { tick: () => tick(), finished };
}
