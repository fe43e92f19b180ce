/**
 * Where a caller waiting outside any line (a multi-key lock, quorum mode) sleeps between attempts.
 * Release messages of its locks are pushed in; `wait` resolves with the first 'free' one, or
 * `undefined` when the timer fires first. A message that arrives while no one is waiting is kept
 * for the next `wait`.
 */
export class WakeSignal {
  private pending?: string;
  private wake?: (message: string | undefined) => void;

  /**
   * @param accept which messages wake the waiter (default: 'free' only; handoffs and wake-ups
   *   meant for line waiters are ignored)
   */
  constructor(private readonly accept: (message: string) => boolean = (m) => m === 'f') {}

  /** Message listener: keeps the accepted messages. */
  readonly push = (message: string): void => {
    if (!this.accept(message)) return;
    if (this.wake) {
      const wake = this.wake;
      this.wake = undefined;
      wake(message);
    } else {
      this.pending = message;
    }
  };

  /** Resolves with a message, or `undefined` after `ms`; rejects when `signal` aborts. */
  wait(ms: number, signal?: AbortSignal): Promise<string | undefined> {
    if (this.pending) {
      const message = this.pending;
      this.pending = undefined;
      return Promise.resolve(message);
    }
    signal?.throwIfAborted();
    return new Promise((resolve, reject) => {
      const done = (message: string | undefined) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.wake = undefined;
        resolve(message);
      };
      const onAbort = () => {
        clearTimeout(timer);
        this.wake = undefined;
        reject(signal?.reason);
      };
      const timer = setTimeout(() => done(undefined), ms);
      this.wake = done;
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Forgets a message that an attempt has already made stale. */
  clear(): void {
    this.pending = undefined;
  }
}
