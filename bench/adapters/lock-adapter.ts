/** A lock held through an adapter; only the adapter that returned it knows what is inside. */
export type HeldLock = unknown;

/**
 * The one operation pair every lock shape needs, implemented once per library with that
 * library's default options (except where a shape needs a wait long enough to queue up).
 */
export interface LockAdapter {
  /**
   * Acquires `key`, waiting the way the library waits by default. Rejects when the library gives
   * up (e.g. redlock after its default 10 retries); shapes count such failures.
   * @param waitMs how long to wait, through the library's own wait option where it has a
   *   time-based one (redlock's wait is a retry count: it keeps its default)
   * @default waitMs the library's default, or `BENCH_WAIT_MS` where the harness chooses it
   */
  acquire(key: string, waitMs?: number): Promise<HeldLock>;
  /** Releases a lock returned by `acquire`. */
  release(lock: HeldLock): Promise<void>;
  /** Closes every connection the adapter opened. */
  close(): Promise<void>;
}

/** One row of the lock tables: a library (or a configuration of one) and how to set it up. */
export interface LockLibrary {
  /** Stable id, used in results.json and in messages to child processes. */
  readonly id: string;
  /** Row label in the tables. */
  readonly label: string;
  /** True for this library's own rows (targets compare ours with the best of the others). */
  readonly ours: boolean;
  /** Connects to the Redis at `url`; resolves once the adapter is ready for `acquire`. */
  create(url: string): Promise<LockAdapter>;
}

/**
 * How long a waiter may wait, in ms, for the libraries whose default is not to wait (ours:
 * `waitMs: 0`) or that the harness writes itself: the same as redis-semaphore's default
 * `acquireTimeout`, so no library gets a longer wait than another's default.
 */
export const BENCH_WAIT_MS = 10_000;

/**
 * TTL given to libraries that have no default for it (redlock needs a duration on every call):
 * the same as our default `ttlMs`.
 */
export const BENCH_TTL_MS = 30_000;
