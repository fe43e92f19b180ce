/**
 * Where a waiting acquisition sleeps between attempts. Release messages for its lock are pushed
 * in; `wait` resolves with the first relevant one, or `undefined` when the timer fires first.
 * A message that arrives while no one is waiting is kept for the next `wait`.
 */
export class WakeSignal {
  private pending?: string;
  private wake?: (message: string | undefined) => void;

  constructor(private readonly token: string) {}

  /** Message listener: keeps 'handed to me' and 'free'; ignores handoffs to other waiters. */
  readonly push = (message: string): void => {
    const forMe = message.startsWith(`h ${this.token} `);
    if (!forMe && message !== 'f') return;
    if (this.wake) {
      const wake = this.wake;
      this.wake = undefined;
      wake(message);
    } else if (forMe || !this.pending) {
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
