import { RedisLockError } from '../errors/redis-lock.error';
import { RedisCommandError } from '../errors/redis-command.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import { MAX_TIMER_MS } from '../options/validate';

/**
 * Failures of the connection or of the topology, which pass: `RedisUnavailableError` (the call
 * may or may not have had its effect). Among them "Script attempted to access a non local key":
 * while resharding moves a slot (`MIGRATING`), a script touched a key it names after a given one
 * (a lock's line) that is not on the node; Redis ends the script at that command. Once the slot
 * has moved, the same call works. And "Command timed out": ioredis's own `commandTimeout`, set on
 * a user's client, is no answer in time as the module's `commandTimeoutMs` is. And `BUSY`: another
 * client's script has run past `busy-reply-threshold`, and Redis refuses every command until it
 * ends or is killed (`SCRIPT KILL`), as while `LOADING`; the refused call had no effect.
 */
const CONNECTION_FAILURE =
  /Connection is closed|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|Stream isn't writeable|enableOfflineQueue|max retries per request|MaxRetriesPerRequest|CLUSTERDOWN|TRYAGAIN|LOADING|READONLY|MASTERDOWN|Failed to refresh slots cache|None of startup nodes|Too many Cluster redirections|attempted to access a non local key|Command timed out|^BUSY /i;

/**
 * Turns whatever a Redis call rejected with into a typed error of this library (whose message and
 * `cause` carry no credential: `RedisLockError` redacts them).
 */
export function toRedisError(operation: string, err: unknown): RedisLockError {
  if (err instanceof RedisLockError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const name = err instanceof Error ? err.name : '';
  return CONNECTION_FAILURE.test(message) || CONNECTION_FAILURE.test(name)
    ? new RedisUnavailableError(operation, message, { cause: err })
    : new RedisCommandError(operation, message, { cause: err });
}

/** A bounded call still waiting for its answer. */
interface Pending {
  deadline: number;
  operation: string;
  ms: number;
  settled: boolean;
  reject: (err: unknown) => void;
}

/**
 * The calls of one bound (`ms`) in the order they were made, so in deadline order: one timer for
 * the earliest unsettled one instead of a timer per call (a hot path makes tens of thousands of
 * calls a second, nearly all answered long before their bound).
 *
 * A queue is in `queues` exactly while its timer is armed: when the timer finds it empty, it
 * leaves the Map (`arm`), so the Map holds only the bounds with a call made within the last
 * bound, not every bound ever used (a batch worker's idle waits each use another one). It is not
 * removed as soon as its last call settles: the timer would then be cleared and armed again on
 * the next call, which on a hot path with one call in flight is every call.
 */
class DeadlineQueue {
  private items: Pending[] = [];
  private head = 0;
  private timer?: NodeJS.Timeout;

  constructor(private readonly ms: number) {}

  add(p: Pending): void {
    this.items.push(p);
    if (!this.timer) this.arm();
  }

  /**
   * Drops the settled calls at the head. Calls nearly always settle in the order they were made,
   * so this keeps the queue as short as the calls in flight: a queue that kept every call until
   * its deadline would hold a few hundred thousand of them on a hot path, all promoted to the
   * old generation for the garbage collector to trace.
   */
  trim(): void {
    while (this.head < this.items.length && this.items[this.head].settled) this.head++;
    if (this.head === this.items.length) {
      this.items.length = 0;
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }

  private arm(): void {
    this.trim();
    if (this.head === this.items.length) {
      this.timer = undefined;
      // Nothing left to time: a later call of this bound makes a new queue. Every call of this
      // queue has settled, so none of them touches it again.
      if (queues.get(this.ms) === this) queues.delete(this.ms);
      return;
    }
    // At most MAX_TIMER_MS: Node fires a longer timer after 1 ms (and warns), and a bound near
    // the largest `commandTimeoutMs` plus a blocking read's block time is longer; `expire` arms
    // the timer again while the deadline is ahead.
    this.timer = setTimeout(
      () => this.expire(),
      Math.min(MAX_TIMER_MS, Math.max(0, this.items[this.head].deadline - Date.now())),
    );
    this.timer.unref();
  }

  private expire(): void {
    const now = Date.now();
    while (this.head < this.items.length) {
      const p = this.items[this.head];
      if (!p.settled && p.deadline > now) break;
      this.head++;
      if (p.settled) continue;
      p.settled = true;
      p.reject(new RedisUnavailableError(p.operation, `no answer within ${p.ms} ms`));
    }
    this.arm();
  }
}

/** The queue of each bound (whole ms) that has calls within the last bound; see `DeadlineQueue`. */
const queues = new Map<number, DeadlineQueue>();

/** @internal How many bounds have a queue now (tests: the Map does not grow with every bound used). */
export function deadlineQueueCount(): number {
  return queues.size;
}

/**
 * Awaits a Redis call for at most `ms`: rejects with `RedisUnavailableError` when it takes longer
 * and maps Redis errors to typed errors. The command itself is not cancelled (Redis has no way to),
 * so anything it may still do must be safe by TTL, or be undone by `onLate`.
 * @param onLate called with the reply when it comes after the bound (the caller was told
 *   `RedisUnavailableError`): Redis ran the call after all, e.g. once a stall ended or from
 *   ioredis's offline queue after a reconnect. For a call whose effect nobody else would undo (a
 *   claim's leases). Must not throw. Never called for a call answered in time.
 */
export function bounded<T>(
  operation: string,
  call: Promise<T>,
  ms: number,
  onLate?: (value: T) => void,
): Promise<T> {
  // Whole ms (rounded up: never a shorter bound than asked): a computed bound such as the time
  // left until a deadline is a fraction, and every distinct bound has a queue of its own.
  ms = Math.ceil(ms);
  return new Promise<T>((resolve, reject) => {
    const p: Pending = { deadline: Date.now() + ms, operation, ms, settled: false, reject };
    let queue = queues.get(ms);
    if (!queue) {
      queue = new DeadlineQueue(ms);
      queues.set(ms, queue);
    }
    const calls = queue;
    calls.add(p);
    call.then(
      (value) => {
        if (p.settled) {
          // Only the bound settles it before its answer: this reply came too late.
          if (onLate) onLate(value);
          return;
        }
        p.settled = true;
        calls.trim();
        resolve(value);
      },
      (err: unknown) => {
        if (p.settled) return;
        p.settled = true;
        calls.trim();
        reject(toRedisError(operation, err));
      },
    );
  });
}
