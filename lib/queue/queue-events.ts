import { Observable } from 'rxjs';
import { RedactingLogger } from '../redaction/redacting-logger';
import { QueueError } from '../errors/queue.error';
import { QueueWaitTimeoutError } from '../errors/queue-wait-timeout.error';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { checkInt, checkKnownKeys } from '../options/validate';
import type { RedisLockConnection } from '../redis/redis-connection';
import { ThrottledWarning } from '../redis/throttled-warning';
import type {
  QueueEvent,
  QueueEventsOptions,
  TaskOutcome,
  WaitForOptions,
} from './interfaces/queue-event.interface';
import type { QueueRedisKeys } from './queue-keys';
import {
  MAX_STREAM_PART,
  QueueEventReader,
  shuttingDown,
  type EventSubscription,
  type ReaderContext,
  type TaskInfoLookup,
  type Waiter,
} from './queue-event-reader';

export { compareEventIds } from './queue-event-reader';

/** `waitFor`'s `timeoutMs` when none is given. */
export const DEFAULT_WAIT_TIMEOUT_MS = 30_000;

/** Longest `waitFor` `timeoutMs` accepted: a day. */
export const MAX_WAIT_TIMEOUT_MS = 86_400_000;

export type { TaskInfoLookup };

/**
 * Throws `RedisLockOptionsError` naming `timeoutMs` unless it is an integer from 1 to 86,400,000;
 * returns it, or 30,000 when undefined.
 */
export function checkWaitTimeoutMs(value: unknown): number {
  return value === undefined
    ? DEFAULT_WAIT_TIMEOUT_MS
    : checkInt('timeoutMs', value, 1, MAX_WAIT_TIMEOUT_MS);
}

/**
 * Throws `RedisLockOptionsError` naming `from` unless it is `'now'`, `'start'` or an event id
 * (`<ms>-<seq>`, each part at most 2^64 - 1); returns it (an id normalised, e.g. `'007-0'` →
 * `'7-0'`), or `'now'` when undefined.
 */
export function checkEventsFrom(value: unknown): string {
  if (value === undefined) return 'now';
  if (value === 'now' || value === 'start') return value;
  const m = typeof value === 'string' ? /^(\d{1,20})-(\d{1,20})$/.exec(value) : null;
  if (m) {
    const ms = BigInt(m[1]);
    const seq = BigInt(m[2]);
    if (ms <= MAX_STREAM_PART && seq <= MAX_STREAM_PART) return `${ms}-${seq}`;
  }
  throw new RedisLockOptionsError(
    'from',
    value,
    "'now', 'start' or an event id '<ms>-<seq>' (the eventId of a QueueEvent)",
  );
}

/** Checks the options of `waitFor` (`RedisLockOptionsError`); returns its `timeoutMs`. */
export function checkWaitForOptions(options: unknown): number {
  const o = checkKnownKeys('', options, ['timeoutMs']) as WaitForOptions;
  return checkWaitTimeoutMs(o.timeoutMs);
}

/** Checks the options of `events` (`RedisLockOptionsError`); returns its `from`. */
export function checkEventsOptions(options: unknown): string {
  const o = checkKnownKeys('', options, ['from']) as QueueEventsOptions;
  return checkEventsFrom(o.from);
}

/**
 * @internal The queue events of one module (docs/queue-events.md): `events` and `waitFor` of
 * `QueueService`. Per queue read in this process, one reader (one blocking connection, one
 * `XREAD … BLOCK 5000` at a time) serves every subscriber and every waiter; it stops a little
 * after the last one left.
 */
export class QueueEventReaders {
  private readonly readers = new Map<string, QueueEventReader>();
  private readonly warning: ThrottledWarning;
  private readonly ctx: ReaderContext;
  private closed = false;

  /**
   * @param connection the module's Redis
   * @param keysOf the keys of a queue (its `events` stream)
   * @param getInfo `QueueService.get`: the task's state now
   */
  constructor(
    private readonly connection: RedisLockConnection,
    private readonly keysOf: (queue: string) => QueueRedisKeys,
    getInfo: TaskInfoLookup,
    logger: RedactingLogger = new RedactingLogger('QueueService'),
  ) {
    this.warning = new ThrottledWarning(logger);
    this.ctx = {
      connection,
      getInfo,
      warn: (message) => this.warning.warn(message),
      stopped: (reader) => {
        if (this.readers.get(reader.queue) === reader) this.readers.delete(reader.queue);
      },
    };
  }

  /** Queues with a reader now (running, or lingering after its last user). */
  get readingQueues(): string[] {
    return [...this.readers.keys()];
  }

  /**
   * The events of `queue` from every instance, as a cold Observable: each subscription gets the
   * events after `from` in stream order, each once. Subscribers of one queue share one reader,
   * which starts at the stream's end whatever their `from`: one that starts from an older id first
   * reads up to the reader's position on its own (XRANGE), one that starts from a later id skips
   * the events up to it on its own. Completes on shutdown.
   * @throws RedisLockOptionsError for bad options; QueueError when events are off
   */
  events(queue: string, options?: QueueEventsOptions): Observable<QueueEvent> {
    const from = checkEventsOptions(options);
    this.checkOn();
    return new Observable<QueueEvent>((subscriber) => {
      if (this.closed) return subscriber.complete();
      // Never the subscriber's `from`: the reader is shared by every subscriber and waiter.
      const reader = this.readerOf(queue);
      const sub: EventSubscription = { closed: false, subscriber };
      void reader.subscribe(sub, from);
      return () => reader.unsubscribe(sub);
    });
  }

  /**
   * Resolves with how task `id` of `queue` ended: at once when it has finished, else on its
   * ending event. Rejects with `QueueWaitTimeoutError` after `timeoutMs`, and with `QueueError`
   * for an unknown task, a task removed meanwhile, events off, or shutdown.
   */
  async waitFor(queue: string, id: string, options?: WaitForOptions): Promise<TaskOutcome> {
    const timeoutMs = checkWaitForOptions(options);
    this.checkOn();
    if (this.closed) throw shuttingDown(queue);
    const reader = this.readerOf(queue);
    return new Promise<TaskOutcome>((resolve, reject) => {
      const done = () => {
        w.settled = true;
        clearTimeout(timer);
        reader.removeWaiter(w);
      };
      const w: Waiter = {
        id,
        settled: false,
        held: [],
        resolve: (outcome) => {
          if (w.settled) return;
          done();
          resolve(outcome);
        },
        reject: (err) => {
          if (w.settled) return;
          done();
          reject(err);
        },
      };
      const timer = setTimeout(
        () => w.reject(new QueueWaitTimeoutError(queue, id, timeoutMs)),
        timeoutMs,
      );
      timer.unref();
      // Registered first, the reader's position taken next, the task looked up last: whatever
      // ends it after the look-up is written after that position, so the reader sees it.
      reader.addWaiter(w);
      reader.takePosition().then(
        () => {
          if (!w.settled) void reader.check(w, true);
        },
        (err: unknown) => w.reject(err),
      );
    });
  }

  /** Stops every reader: pending waiters reject with a `QueueError`, subscribers complete. */
  close(): void {
    this.closed = true;
    for (const reader of [...this.readers.values()]) reader.shutDown();
    this.readers.clear();
  }

  private checkOn(): void {
    if (this.connection.options.queue.eventsMaxLen === 0) {
      throw new QueueError(
        'queue events are off (module option queue.eventsMaxLen: 0): set it above 0 to use events() and waitFor()',
      );
    }
  }

  private readerOf(queue: string): QueueEventReader {
    let reader = this.readers.get(queue);
    if (!reader) {
      reader = new QueueEventReader(this.ctx, queue, this.keysOf(queue).events);
      this.readers.set(queue, reader);
    }
    return reader;
  }
}
