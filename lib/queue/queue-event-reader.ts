// The reader of one queue's event stream (docs/queue-events.md): one blocking XREAD per queue and
// process serving every `events()` subscriber and `waitFor` waiter; `QueueEventReaders`
// (queue-events.ts) owns one per queue.
import type { Cluster, Redis } from 'ioredis';
import type { Subscriber } from 'rxjs';
import { QueueError } from '../errors/queue.error';
import { bounded } from '../redis/bounded';
import type { RedisLockConnection } from '../redis/redis-connection';
import type {
  QueueEvent,
  QueueEventType,
  TaskError,
  TaskOutcome,
} from './interfaces/queue-event.interface';
import type { QueueTaskInfo } from './interfaces/task.interface';
import { TASK_EXPIRED } from './task-errors';

/** How a reader looks a task up (`QueueService.get`): its state now. */
export type TaskInfoLookup = (queue: string, id: string) => Promise<QueueTaskInfo | undefined>;

/** Longest a reader's XREAD blocks: with nothing happening, one command per queue this often. */
const BLOCK_MS = 5_000;

/** Entries one XREAD (or one XRANGE of a catch-up) returns at most. */
const READ_COUNT = 1_000;

/**
 * How long a reader keeps reading after its last subscriber or waiter left, in ms: a caller that
 * enqueues and waits, one task after the other, reuses the connection and its position.
 */
export const LINGER_MS = 2_000;

/** Pause after a failed read: doubles from the first to the second, in ms. */
const ERROR_PAUSE_MS = [100, 5_000] as const;

export const MAX_STREAM_PART = 18_446_744_073_709_551_615n;

type Client = Redis | Cluster;

/** One stream entry as Redis returns it: its id and its field/value pairs. */
type RawEntry = [id: string, fields: string[]];

/** Orders two stream ids (`<ms>-<seq>`, decimal without leading zeros): < 0, 0 or > 0. */
export function compareEventIds(a: string, b: string): number {
  const da = a.indexOf('-');
  const db = b.indexOf('-');
  return (
    da - db ||
    (a.slice(0, da) < b.slice(0, db) ? -1 : a.slice(0, da) > b.slice(0, db) ? 1 : 0) ||
    a.length - da - (b.length - db) ||
    (a < b ? -1 : a > b ? 1 : 0)
  );
}

const ENDINGS = new Set<string>(['completed', 'dead', 'cancelled', 'expired', 'removed']);
const FINISHED = new Set<string>(['completed', 'dead', 'cancelled', 'expired']);

/** `e` of an entry: JSON `{name, message, stack?}`, or (not starting with `{`) a plain message. */
function parseError(text: string): TaskError {
  if (text.startsWith('{')) {
    try {
      const e = JSON.parse(text) as Partial<TaskError>;
      return {
        name: typeof e.name === 'string' ? e.name : 'Error',
        message: typeof e.message === 'string' ? e.message : '',
        ...(typeof e.stack === 'string' ? { stack: e.stack } : {}),
      };
    } catch {
      // Not JSON after all: keep the text as the message.
    }
  }
  return { name: 'Error', message: text };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Turns a stream entry into a `QueueEvent` (fields: docs/queue-events.md). */
export function toQueueEvent(queue: string, [eventId, fields]: RawEntry): QueueEvent {
  const event: {
    -readonly [K in keyof QueueEvent]: QueueEvent[K];
  } = { eventId, type: 'enqueued', queue, at: Number(eventId.slice(0, eventId.indexOf('-'))) };
  for (let n = 0; n + 1 < fields.length; n += 2) {
    const value = fields[n + 1];
    switch (fields[n]) {
      case 't':
        event.type = value as QueueEventType;
        break;
      case 'i':
        event.taskId = value;
        break;
      case 'a':
        event.attempt = Number(value);
        break;
      case 'r':
        event.result = parseJson(value);
        break;
      case 'e':
        event.error = parseError(value);
        break;
      case 'p':
        event.progress = parseJson(value);
        break;
      case 'd':
        event.delayMs = Number(value);
        break;
      case 'k':
        event.keptTaskId = value;
        break;
      case 'n':
        event.name = value;
        break;
    }
  }
  return event;
}

function outcomeOfEvent(event: QueueEvent): TaskOutcome {
  if (event.type === 'expired') return { state: 'expired', error: TASK_EXPIRED };
  return event.type === 'completed'
    ? { state: 'completed', result: event.result }
    : {
        state: event.type as 'dead' | 'cancelled',
        error: event.error ?? { name: 'Error', message: '' },
      };
}

function outcomeOfInfo(info: QueueTaskInfo): TaskOutcome {
  if (info.state === 'expired') return { state: 'expired', error: TASK_EXPIRED };
  return info.state === 'completed'
    ? { state: 'completed', result: info.result }
    : {
        state: info.state as 'dead' | 'cancelled',
        error: info.error ?? { name: 'Error', message: info.lastError ?? '' },
      };
}

/** One `waitFor` call. */
export interface Waiter {
  readonly id: string;
  settled: boolean;
  /**
   * Set from registration until the first check answered, and during a check again: the ending
   * events seen meanwhile are judged once the check has told whether the task is still running.
   */
  held?: QueueEvent[];
  /** The connection dropped during a check: check again once it answered. */
  again?: boolean;
  /** When the task was (re-)enqueued, from the last check: older ending events are not its own. */
  enqueuedAt?: number;
  /**
   * The last check found no such task: it may have ended (once or more, with the same id), not
   * been kept, and its ending event(s) not read yet. Then only its LAST ending event up to
   * `unknownAfter` counts: the ending events read meanwhile are kept as `candidate` (the later
   * one replacing the earlier), and the waiter settles once the reader has read up to
   * `unknownAfter`.
   */
  missing?: boolean;
  /** Missing: the stream's last id after the look-up. Settled once the reader has read up to it. */
  unknownAfter?: string;
  /** Missing: its last ending event read so far, not after `unknownAfter`. */
  candidate?: QueueEvent;
  readonly resolve: (outcome: TaskOutcome) => void;
  readonly reject: (err: unknown) => void;
}

/** One subscriber of `events`. */
export interface EventSubscription {
  /** Id of the last event delivered (or the point to start after); undefined while joining. */
  after?: string;
  /** Entries the reader dispatched while this subscriber was catching up. */
  buffer?: RawEntry[];
  closed: boolean;
  readonly subscriber: Subscriber<QueueEvent>;
}

/** What a reader needs from its owner. */
export interface ReaderContext {
  readonly connection: RedisLockConnection;
  readonly getInfo: TaskInfoLookup;
  readonly warn: (message: string) => void;
  readonly stopped: (reader: QueueEventReader) => void;
}

/**
 * @internal Reads the event stream of one queue for every subscriber and waiter of this process:
 * one blocking connection, `XREAD COUNT 1000 BLOCK 5000` from the last id read. Its position is
 * always a concrete id (taken with `XREVRANGE … COUNT 1`, never `$`), so that whatever is written
 * after a caller joined is read.
 */
export class QueueEventReader {
  /** Id of the last entry read (every later entry is still to be dispatched). */
  private position?: string;
  private readonly subscriptions = new Set<EventSubscription>();
  private readonly waiters = new Map<string, Set<Waiter>>();
  private waiterCount = 0;
  /**
   * Waiters whose task was not found: settled with their `candidate` (or rejected as unknown)
   * once the reader passes their `unknownAfter`.
   */
  private readonly doubtful = new Set<Waiter>();
  /** The XREVRANGE taking the first position, while under way. */
  private attempt?: Promise<string>;
  private readonly positionListeners: ((position: string) => void)[] = [];
  private blocker?: Client;
  private stopped = false;
  /** The last read reached the end of the stream (else the reader is reading older entries). */
  private caughtUp = true;
  private needsRecheck = false;
  private errorPause = 0;
  private linger?: NodeJS.Timeout;
  private wake?: () => void;

  /**
   * Starts at the stream's last entry (taken by the loop, or by the first `takePosition`), never
   * before or after it: the reader is shared, so a subscriber's `from` is that subscriber's own
   * business (`subscribe`).
   */
  constructor(
    private readonly ctx: ReaderContext,
    readonly queue: string,
    private readonly key: string,
  ) {
    void this.run();
  }

  /** Resolves with the position once the reader has one (retried by the loop until then). */
  positioned(): Promise<string> {
    if (this.position !== undefined) return Promise.resolve(this.position);
    return new Promise((resolve) => this.positionListeners.push(resolve));
  }

  /** The position, taking it now if there is none yet; rejects when Redis does not answer. */
  takePosition(): Promise<string> {
    if (this.position !== undefined) return Promise.resolve(this.position);
    this.attempt ??= this.lastId().then(
      (id) => {
        this.attempt = undefined;
        if (this.position === undefined) {
          this.position = id;
          this.caughtUp = true;
          for (const listener of this.positionListeners.splice(0)) listener(id);
        }
        return this.position;
      },
      (err: unknown) => {
        this.attempt = undefined;
        throw err;
      },
    );
    return this.attempt;
  }

  /** Id of the stream's last entry ('0-0' when it has none). */
  private async lastId(): Promise<string> {
    const last = await this.ctx.connection.call('queue events XREVRANGE', (c) =>
      c.xrevrange(this.key, '+', '-', 'COUNT', 1),
    );
    return last[0]?.[0] ?? '0-0';
  }

  // ---- waiters ----

  addWaiter(w: Waiter): void {
    this.retain();
    let set = this.waiters.get(w.id);
    if (!set) this.waiters.set(w.id, (set = new Set()));
    set.add(w);
    this.waiterCount++;
  }

  removeWaiter(w: Waiter): void {
    const set = this.waiters.get(w.id);
    if (!set?.delete(w)) return;
    if (set.size === 0) this.waiters.delete(w.id);
    this.doubtful.delete(w);
    this.waiterCount--;
    this.release();
  }

  /**
   * Looks the task up (after the reader has its position): finished → settles; unknown → settles
   * as unknown once the reader has read what was written before the look-up; else waits for its
   * ending event. `first`: a failure rejects the waiter (else it is retried after the next read).
   */
  async check(w: Waiter, first: boolean): Promise<void> {
    w.held ??= [];
    let info: QueueTaskInfo | undefined;
    try {
      info = await this.ctx.getInfo(this.queue, w.id);
    } catch (err) {
      this.failedCheck(w, first, err);
      return;
    }
    if (w.settled) {
      w.held = undefined;
      return;
    }
    if (info && FINISHED.has(info.state)) {
      w.held = undefined;
      return w.resolve(outcomeOfInfo(info));
    }
    if (info) {
      // Running: its own ending event ends it.
      this.doubtful.delete(w);
      w.missing = false;
      w.unknownAfter = undefined;
      w.candidate = undefined;
      w.enqueuedAt = info.enqueuedAt;
      const held = w.held;
      w.held = undefined;
      for (const event of held) if (this.offer(w, event)) return;
      if (w.again) {
        w.again = false;
        return this.check(w, false);
      }
      return;
    }
    // Not there: it may have ended, not been kept, and its event not read yet; and a task ended
    // and enqueued again with the same id has several ending events, of which only the last one
    // up to now is its outcome. The events read meanwhile stay held until "now" (the stream's
    // last id) is known: an event the reader reads before that may have been written after it.
    let last: string;
    try {
      last = await this.lastId();
    } catch (err) {
      this.failedCheck(w, first, err);
      return;
    }
    const held = w.held;
    w.held = undefined;
    if (w.settled) return;
    w.missing = true;
    w.enqueuedAt = undefined;
    w.unknownAfter = last;
    for (const event of held) this.offer(w, event);
    if (w.again) {
      w.again = false;
      return this.check(w, false);
    }
    if (compareEventIds(this.position!, last) >= 0) this.settleMissing(w);
    else this.doubtful.add(w);
  }

  /**
   * A check failed: the first one rejects the waiter; a later one is tried again after the next
   * read, and the events it held are judged as the previous check said.
   */
  private failedCheck(w: Waiter, first: boolean, err: unknown): void {
    const held = w.held ?? [];
    w.held = undefined;
    if (first) return w.reject(err);
    this.needsRecheck = true;
    for (const event of held) if (this.offer(w, event)) return;
  }

  /**
   * A missing task's waiter once the reader has read up to its `unknownAfter`: the last ending
   * event of its id read up to there is its outcome; none → unknown.
   */
  private settleMissing(w: Waiter): void {
    const event = w.candidate;
    w.candidate = undefined;
    if (event) this.settle(w, event);
    else w.reject(unknownTask(this.queue, w.id));
  }

  /**
   * An ending event of the waiter's task: settles it (true) unless it is not its own, or (a
   * missing task) a later one may still come.
   */
  private offer(w: Waiter, event: QueueEvent): boolean {
    if (w.settled) return true;
    if (w.held) {
      w.held.push(event);
      return false;
    }
    if (w.missing) {
      // Written after the look-up's "now": the waiter settles before the reader gets there.
      if (w.unknownAfter === undefined || compareEventIds(event.eventId, w.unknownAfter) <= 0)
        w.candidate = event;
      return false;
    }
    // An event older than the task's enqueue belongs to an earlier task with the same id.
    if (w.enqueuedAt !== undefined && event.at < w.enqueuedAt) return false;
    this.settle(w, event);
    return true;
  }

  /** Settles the waiter with an ending event: its outcome, or (removed) a rejection. */
  private settle(w: Waiter, event: QueueEvent): void {
    if (event.type === 'removed' || event.type === 'obliterated') {
      const how = event.type === 'obliterated' ? ' (the queue was obliterated)' : '';
      w.reject(
        new QueueError(
          `queue '${this.queue}': task '${w.id}' was removed before it finished${how}`,
        ),
      );
    } else {
      w.resolve(outcomeOfEvent(event));
    }
  }

  /**
   * After a lost connection, or entries trimmed before the reader read them: a waiter's ending
   * event may be gone, so look every waiter up.
   */
  private recheck(): void {
    this.needsRecheck = false;
    for (const set of this.waiters.values()) {
      for (const w of set) {
        // A check under way may have looked before the drop: it looks again when it is done.
        if (w.held) w.again = true;
        else if (!w.settled) void this.check(w, false);
      }
    }
  }

  // ---- subscribers ----

  /** Adds `sub`, which receives the events after `from` ('now', 'start', an id), in order, once each. */
  async subscribe(sub: EventSubscription, from: string): Promise<void> {
    this.retain();
    sub.buffer = [];
    this.subscriptions.add(sub);
    // Whatever the reader dispatches from now on is buffered: it comes after `joined`.
    const joined = this.position ?? (await this.positioned());
    let start = from === 'now' ? joined : from === 'start' ? '0-0' : from;
    if (from === 'now' && !this.caughtUp) {
      // The shared reader is still reading older entries: 'now' is the stream's last entry.
      const last = await this.retrying(sub, 'reading the last event', () => this.lastId());
      if (last === undefined) return;
      if (compareEventIds(last, start) > 0) start = last;
    }
    sub.after = start;
    while (compareEventIds(sub.after, joined) < 0) {
      // Catching up: the entries between its start and where it joined the shared reader.
      const after = sub.after;
      const page = await this.retrying(sub, 'reading past events', () =>
        this.ctx.connection.call(
          'queue events XRANGE',
          (c) =>
            c.xrange(this.key, `(${after}`, joined, 'COUNT', READ_COUNT) as Promise<RawEntry[]>,
        ),
      );
      if (page === undefined) return;
      for (const entry of page) this.deliver(sub, entry);
      if (page.length < READ_COUNT) break;
    }
    if (sub.closed) return;
    const buffered = sub.buffer;
    sub.buffer = undefined;
    for (const entry of buffered) this.deliver(sub, entry);
  }

  /** Runs `read` until it succeeds (pausing after failures); undefined once `sub` is closed. */
  private async retrying<T>(
    sub: EventSubscription,
    what: string,
    read: () => Promise<T>,
  ): Promise<T | undefined> {
    let pause = 0;
    while (!sub.closed && !this.stopped) {
      try {
        const value = await read();
        return sub.closed ? undefined : value;
      } catch (err) {
        pause = Math.min(ERROR_PAUSE_MS[1], pause ? pause * 2 : ERROR_PAUSE_MS[0]);
        this.ctx.warn(
          `queue '${this.queue}': ${what} failed (${(err as Error).message}); retrying in ${pause} ms`,
        );
        await new Promise((resolve) => setTimeout(resolve, pause).unref());
      }
    }
    return undefined;
  }

  unsubscribe(sub: EventSubscription): void {
    sub.closed = true;
    if (this.subscriptions.delete(sub)) this.release();
  }

  private deliver(sub: EventSubscription, entry: RawEntry, event?: QueueEvent): void {
    if (sub.closed || compareEventIds(entry[0], sub.after!) <= 0) return;
    sub.after = entry[0];
    sub.subscriber.next(event ?? toQueueEvent(this.queue, entry));
  }

  // ---- the read loop ----

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        if (this.position === undefined) await this.takePosition();
        if (this.stopped) return;
        const blocker = (this.blocker ??= this.openBlocker());
        const reply = (await bounded(
          'queue events XREAD',
          (blocker as Redis).xread(
            'COUNT',
            READ_COUNT,
            'BLOCK',
            BLOCK_MS,
            'STREAMS',
            this.key,
            this.position!,
          ),
          BLOCK_MS + this.ctx.connection.options.commandTimeoutMs,
        )) as [string, RawEntry[]][] | null;
        if (this.stopped) return;
        this.errorPause = 0;
        const entries = reply?.[0]?.[1];
        const from = this.position!;
        if (entries && entries.length > 0) this.dispatch(entries);
        this.caughtUp = !entries || entries.length < READ_COUNT;
        // An XREAD continues after `from` whatever was trimmed since: when more than eventsMaxLen
        // events were written before it ran (this process busy for a moment, a script writing
        // many), it returned the entries left, and a waited task's end may have been among the
        // others. Only a read that returned entries can follow such a gap (a trim keeps the
        // newest), and only waiters need to know: they look their tasks up again.
        if (entries && entries.length > 0 && this.waiterCount > 0) {
          if (await this.trimmedAfter(from)) this.needsRecheck = true;
          if (this.stopped) return;
        }
        if (this.needsRecheck) this.recheck();
      } catch (err) {
        if (this.stopped) return;
        // A read that outlived its bound may still be answered: never reuse that connection.
        this.dropBlocker();
        this.needsRecheck = true;
        this.errorPause = Math.min(
          ERROR_PAUSE_MS[1],
          this.errorPause ? this.errorPause * 2 : ERROR_PAUSE_MS[0],
        );
        this.ctx.warn(
          `queue '${this.queue}': reading events failed (${(err as Error).message}); retrying in ${this.errorPause} ms`,
        );
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          setTimeout(resolve, this.errorPause).unref();
        });
        this.wake = undefined;
      }
    }
  }

  /**
   * Whether entries after `id` may have been trimmed before the reader read them: the stream's
   * first entry is newer than `id` (or the stream is gone). Conservative: it says yes too when
   * only `id` itself was trimmed, which takes at least eventsMaxLen newer entries, when `id` is
   * '0-0' (silently), and when the look-up fails.
   */
  private async trimmedAfter(id: string): Promise<boolean> {
    let first: RawEntry[];
    try {
      first = (await this.ctx.connection.call('queue events XRANGE', (c) =>
        c.xrange(this.key, '-', '+', 'COUNT', 1),
      )) as RawEntry[];
    } catch (err) {
      this.ctx.warn(
        `queue '${this.queue}': checking for events trimmed before they were read failed (${(err as Error).message}); every waitFor looks its task up again`,
      );
      return true;
    }
    if (first.length > 0 && compareEventIds(first[0][0], id) <= 0) return false;
    // From '0-0' (the stream was empty or new when the reader started) every first entry is newer:
    // the waiters look their tasks up once, without a warning that would mostly be false.
    if (id === '0-0') return true;
    const oldest = first.length > 0 ? `its oldest event is ${first[0][0]}` : 'the stream is empty';
    this.ctx.warn(
      `queue '${this.queue}': events after ${id} may have been trimmed before this process read them (${oldest}: more than queue.eventsMaxLen written meanwhile?); every waitFor looks its task up again`,
    );
    return true;
  }

  private openBlocker(): Client {
    const blocker = this.ctx.connection.duplicate();
    // Reconnected after a drop (CLIENT KILL, a restart): events trimmed meanwhile are gone, so
    // the waiters are looked up again as soon as it is back.
    blocker.on('close', () => {
      if (!this.stopped) this.needsRecheck = true;
    });
    blocker.on('ready', () => {
      if (!this.stopped && this.needsRecheck && this.position !== undefined) this.recheck();
    });
    return blocker;
  }

  private dropBlocker(): void {
    this.blocker?.disconnect();
    this.blocker = undefined;
  }

  private dispatch(entries: RawEntry[]): void {
    for (const entry of entries) {
      const fields = entry[1];
      let type: string | undefined;
      let taskId: string | undefined;
      for (let n = 0; n + 1 < fields.length; n += 2) {
        if (fields[n] === 't') type = fields[n + 1];
        else if (fields[n] === 'i') taskId = fields[n + 1];
      }
      let event: QueueEvent | undefined;
      const waiters =
        taskId !== undefined && type !== undefined && ENDINGS.has(type)
          ? this.waiters.get(taskId)
          : undefined;
      if (waiters) {
        event = toQueueEvent(this.queue, entry);
        for (const w of [...waiters]) this.offer(w, event);
      } else if (type === 'obliterated') {
        // No task id: every task waited for was removed with the queue.
        event = toQueueEvent(this.queue, entry);
        for (const set of [...this.waiters.values()]) {
          for (const w of [...set]) this.offer(w, event);
        }
      }
      for (const sub of this.subscriptions) {
        if (sub.buffer) sub.buffer.push(entry);
        else this.deliver(sub, entry, (event ??= toQueueEvent(this.queue, entry)));
      }
    }
    this.position = entries[entries.length - 1][0];
    for (const w of [...this.doubtful]) {
      // A check under way settles it when it is done.
      if (!w.held && compareEventIds(this.position, w.unknownAfter!) >= 0) this.settleMissing(w);
    }
  }

  // ---- life cycle ----

  private retain(): void {
    clearTimeout(this.linger);
    this.linger = undefined;
  }

  private release(): void {
    if (this.subscriptions.size > 0 || this.waiterCount > 0 || this.stopped) return;
    clearTimeout(this.linger);
    this.linger = setTimeout(() => this.stop(), LINGER_MS);
    this.linger.unref();
  }

  /** Stops reading and closes its connection. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.linger);
    this.dropBlocker();
    this.wake?.();
    this.ctx.stopped(this);
  }

  /** Shutdown: rejects the waiters, completes the subscribers, stops. */
  shutDown(): void {
    for (const set of [...this.waiters.values()]) {
      for (const w of [...set]) w.reject(shuttingDown(this.queue));
    }
    for (const sub of [...this.subscriptions]) {
      this.unsubscribe(sub);
      sub.subscriber.complete();
    }
    this.stop();
  }
}

export function unknownTask(queue: string, id: string): QueueError {
  return new QueueError(
    `queue '${queue}': task '${id}' is unknown: never enqueued, or finished and no longer kept (keepCompleted / keepDead)`,
  );
}

export function shuttingDown(queue: string): QueueError {
  return new QueueError(`queue '${queue}': waitFor stopped: the application is shutting down`);
}
