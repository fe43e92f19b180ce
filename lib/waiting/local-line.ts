/**
 * A caller waiting in this process: settled once, by a grant, its deadline, its AbortSignal or a
 * failure of the wait on its behalf.
 */
export class LocalWaiter<O, T> {
  private done = false;
  /** @internal whether its line counts it in `pending` (it stands in the line, unsettled) */
  counted = false;

  /** @internal created by LocalLine */
  constructor(
    /** The caller's options. */
    readonly options: O,
    private readonly onResolve: (value: T | PromiseLike<T>) => void,
    private readonly onReject: (reason: unknown) => void,
    private readonly cleanup: () => void,
  ) {}

  /** Whether the caller has its answer already. */
  get settled(): boolean {
    return this.done;
  }

  /** Answers the caller; `false` when it already had an answer (then `value` is not taken). */
  resolve(value: T | PromiseLike<T>): boolean {
    if (this.done) return false;
    this.done = true;
    this.cleanup();
    this.onResolve(value);
    return true;
  }

  /** Fails the caller; `false` when it already had an answer. */
  reject(reason: unknown): boolean {
    if (this.done) return false;
    this.done = true;
    this.cleanup();
    this.onReject(reason);
    return true;
  }
}

/**
 * The in-process FIFO of callers that wait for one resource (the local half of a cohort): each
 * caller has its own deadline and AbortSignal, and only the process as a whole stands in the Redis
 * line. Adding, taking the first and dropping settled callers are O(1) amortized, so a crowd of
 * thousands costs nothing but memory.
 */
export class LocalLine<O, T> {
  private items: LocalWaiter<O, T>[] = [];
  private head = 0;
  /** Callers in `items` still waiting: kept as they come and go, so that reading it is O(1). */
  private waiting = 0;

  /** @param onLeave called when a caller leaves by its deadline or signal (not by a grant) */
  constructor(private readonly onLeave: () => void) {}

  /**
   * Adds a caller at the end (or, with `first`, at the front) and resolves with what it is given,
   * or with (the outcome of) `onTimeout()` after `waitMs`; rejects with the signal's reason when
   * `signal` aborts.
   */
  add(
    options: O,
    waitMs: number,
    signal: AbortSignal | undefined,
    onTimeout: () => T | PromiseLike<T>,
    first = false,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        if (waiter.reject(signal?.reason)) this.onLeave();
      };
      // Node's timers count whole milliseconds, so a timer can fire up to 1 ms early by the
      // clocks callers measure with: it then waits out the rest, and a caller that times out has
      // always waited its full waitMs (by the monotonic clock, which a wall-clock step moves not).
      const until = performance.now() + Math.max(0, waitMs);
      const onTimer = () => {
        const rest = until - performance.now();
        if (rest > 0) timer = setTimeout(onTimer, rest);
        else if (waiter.resolve(onTimeout())) this.onLeave();
      };
      let timer = setTimeout(onTimer, Math.max(0, waitMs));
      const waiter = new LocalWaiter<O, T>(options, resolve, reject, () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.uncount(waiter);
      });
      // Aborted before it could be added (e.g. during the caller's first round trip): it never
      // waits. The owner learns it from the rejection, not from onLeave.
      if (signal?.aborted) return void waiter.reject(signal.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (first) this.unshift(waiter);
      else this.items.push(this.count(waiter));
    });
  }

  /** The first caller still waiting, without removing it. */
  first(): LocalWaiter<O, T> | undefined {
    this.dropSettled();
    return this.items[this.head];
  }

  /** The first caller still waiting whose options match (e.g. the one a grant names). */
  find(match: (options: O) => boolean): LocalWaiter<O, T> | undefined {
    for (let i = this.head; i < this.items.length; i++) {
      const waiter = this.items[i];
      if (!waiter.settled && match(waiter.options)) return waiter;
    }
    return undefined;
  }

  /** Removes and returns the first caller still waiting. */
  shift(): LocalWaiter<O, T> | undefined {
    const waiter = this.first();
    if (waiter) {
      this.head++;
      this.uncount(waiter);
    }
    return waiter;
  }

  /** Puts a caller back at the front (a handoff to it did not happen). */
  unshift(waiter: LocalWaiter<O, T>): void {
    if (waiter.settled) return;
    if (this.head > 0) this.items[--this.head] = this.count(waiter);
    else this.items.unshift(this.count(waiter));
  }

  /** How many callers are still waiting. */
  get pending(): number {
    return this.waiting;
  }

  /** Fails every caller still waiting. */
  rejectAll(reason: unknown): void {
    const waiting = this.items.slice(this.head);
    this.items = [];
    this.head = 0;
    for (const waiter of waiting) {
      this.uncount(waiter);
      waiter.reject(reason);
    }
  }

  // Each timed-out caller's error reads `pending` (how many wait ahead): counting by a scan made
  // 10,000 callers timing out together cost O(n²), 300–700 ms of a blocked event loop.
  private count(waiter: LocalWaiter<O, T>): LocalWaiter<O, T> {
    waiter.counted = true;
    this.waiting++;
    return waiter;
  }

  private uncount(waiter: LocalWaiter<O, T>): void {
    if (!waiter.counted) return;
    waiter.counted = false;
    this.waiting--;
  }

  private dropSettled(): void {
    while (this.head < this.items.length && this.items[this.head].settled) this.head++;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }
}
