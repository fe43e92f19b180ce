/**
 * `process.nextTick` and `setImmediate` as they were when the library loaded. The library defers
 * work to the end of the tick (batched enqueues, corked socket writes, a worker's acks) with
 * these, so that a test's fake timers, which replace both (`jest.useFakeTimers()` does by
 * default), do not hold that work until the test moves the clock: an `await queues.enqueue()`
 * under fake timers resolves as it does without them. Timers (`setTimeout`) stay fakeable:
 * TTLs, delays and backoffs follow the fake clock; only the bounds of a shutdown do not
 * (`setTimeoutUnfaked`).
 */
export const nextTick: typeof process.nextTick = process.nextTick.bind(process);

/** `setImmediate` as it was when the library loaded (see `nextTick`). */
export const setImmediateUnfaked: typeof setImmediate = setImmediate;

/**
 * `setTimeout` and `clearTimeout` as they were when the library loaded: for how long a shutdown
 * waits (`queue.drainTimeoutMs`), a bound of real time. On the fake clock nothing moves it
 * while `app.close()` is awaited, and a handler that never returns would hold the close forever.
 */
export const setTimeoutUnfaked: typeof setTimeout = setTimeout;
export const clearTimeoutUnfaked: typeof clearTimeout = clearTimeout;

const hrtime = process.hrtime.bigint.bind(process.hrtime);
/** A monotonic clock in ms as it was when the library loaded (fake timers replace `hrtime` too). */
export const unfakedNowMs = (): number => Number(hrtime() / 1_000_000n);
