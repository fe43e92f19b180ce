import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import { WaitingRoomPlaceLostError } from '../errors/waiting-room-place-lost.error';
import { WaitingRoomTimeoutError } from '../errors/waiting-room-timeout.error';
import { MAX_TIMER_MS } from '../options/validate';
import { RedactingLogger } from '../redaction/redacting-logger';
import type { PubSubHub } from '../redis/pubsub-hub';
import { MIN_ABSENT_MS, type WaitingRoomStatus } from './waiting-room-options';
import {
  CHANNEL,
  messageClock,
  type Presence,
  type RoomClock,
  type RoomMessage,
  type WaitingRoomStore,
} from './waiting-room-store';
import { setImmediateUnfaked } from '../redis/unfaked-ticks';

/**
 * Least time between two admission calls for one room, in ms (after this instance's own call, or
 * another instance's call heard of): above 2.5 visitors a second, admissions come in batches (the
 * Redis clock counts them: a late call admits all that are due), so a room costs about 2.5 such
 * calls a second, whatever its rate and number of instances.
 */
const MIN_ADVANCE_GAP_MS = 400;
/**
 * Added to that gap after an admission made by another instance's call: the instance that made
 * the last call makes the next one, and the others, whose timers would fire within ms of it, find
 * its message first instead of each making a call that admits one visitor or none. Should that
 * instance stop calling (its visitors are all in), another one takes over this much later; the
 * Redis clock admits all that were due meanwhile.
 */
const FOLLOWER_DELAY_MS = 100;
/** Least time between two `onProgress` calls of one waiter, in ms. */
const PROGRESS_EVERY_MS = 1_000;

/** One `wait` call, parked on this instance. */
interface Waiter {
  visitor: string;
  /** Its position (1 = next): exact at `asOf` (Redis ms), then lowered by the admissions heard of. */
  position: number;
  asOf: number;
  resolve: (status: WaitingRoomStatus) => void;
  reject: (err: unknown) => void;
  onProgress?: (status: WaitingRoomStatus) => void;
  /** The position last told to `onProgress`. */
  told?: number;
  end: () => void;
}

/**
 * The visitors of one room parked on this instance. None of them costs a Redis call while it
 * waits: the room's channel says who was admitted; one timer, set from the room's clock in Redis
 * (next admission, rate) and the first local visitor's position, calls for the admissions when
 * that visitor's turn comes (whoever is due, on any instance, is admitted by that call); one
 * lease call every `absentMs / 3` keeps every local visitor's place (the lease stands for all of
 * them; when it had run out, they are parked again, 1,000 per call, and their positions read).
 */
export class RoomWatch {
  private readonly waiters = new Map<string, Set<Waiter>>();
  /** Says when a caller's `onProgress` threw (the wait goes on). */
  private readonly logger = new RedactingLogger('WaitingRoomService');
  private clock?: RoomClock;
  /** Local ms minus Redis ms, from the last reply or message. */
  private offset = 0;
  /** Visitors that stopped waiting unadmitted, to unpark in one call. */
  private unparking: string[] = [];
  /**
   * Visitors whose unpark failed (Redis out of reach, or `BUSY`: it had no effect): sent again
   * with the next unparks and before each lease renewal, which would otherwise keep them parked
   * (and admit one in its turn: a pass to nobody) for as long as other visitors wait here.
   */
  private owed: string[] = [];
  /** Unpark calls in flight: the watch does not end before they do (one may fail, owed). */
  private flushing = 0;
  /** Local ms since the watch has had no visitor but unparks owed (0: not idle). */
  private idleSince = 0;
  /** Tries the owed unparks again while the watch has no visitor. */
  private retryTimer?: NodeJS.Timeout;
  /** `onEmpty` was called: the service made a new watch for any later wait. */
  private ended = false;
  /**
   * `wait` calls between `listen` and `park` (or their end), by visitor: the channel stays
   * subscribed, and a visitor joining again is not unparked by an earlier wait's end.
   */
  private readonly joining = new Map<string, number>();
  /**
   * Admissions heard of for visitors in `joining`, by visitor: the message can come before the
   * join's reply (the channel was subscribed first), and `park` then resolves at once.
   */
  private readonly early = new Map<string, { redisNow: number; passMs: number }>();
  private pending = 0;
  /** The module shut down (`close`): a join still in flight then ends at `park`. */
  private closed = false;
  private unlisten?: () => void;
  private listening?: Promise<void>;
  private advanceTimer?: NodeJS.Timeout;
  private presenceTimer?: NodeJS.Timeout;
  private progressTimer?: NodeJS.Timeout;
  /** Local ms from which this instance may call for admissions (`MIN_ADVANCE_GAP_MS`). */
  private advanceFrom = 0;
  /**
   * This instance's timer made the last admission call heard of: while admissions come in
   * batches it keeps making them, every `MIN_ADVANCE_GAP_MS`, for every instance's visitors.
   */
  private leading = false;
  private advancing = false;
  private syncing = false;

  /**
   * @param onEmpty called when the last local visitor left
   */
  /**
   * @param instance this instance's id in the room's leases
   */
  constructor(
    private readonly room: string,
    private readonly keys: string[],
    private readonly instance: string,
    private readonly store: WaitingRoomStore,
    private readonly hub: PubSubHub,
    private readonly onEmpty: () => void,
  ) {}

  /**
   * Subscribes the room's channel (once), before `visitor` joins: no admission is missed. Each
   * call is followed by `park` or `done`.
   */
  listen(visitor: string): Promise<void> {
    this.pending++;
    this.idleSince = 0;
    this.joining.set(visitor, (this.joining.get(visitor) ?? 0) + 1);
    this.listening ??= this.hub
      .listen(
        this.keys[CHANNEL],
        (message) => this.onMessage(message),
        () => void this.sync(),
      )
      .then((unlisten) => {
        this.unlisten = unlisten;
      })
      .catch((err: unknown) => {
        this.listening = undefined;
        throw err;
      });
    return this.listening;
  }

  /**
   * A `listen` that will not `park`: the visitor was admitted at once, or its join failed
   * (`failed`: it may still be parked here by an earlier wait whose end left it parked for this
   * join, so it is unparked unless another wait of it is still here).
   */
  done(visitor: string, failed: boolean): void {
    this.joined(visitor);
    if (failed) this.unpark(visitor);
    this.endIfIdle();
  }

  private joined(visitor: string): void {
    this.pending--;
    const n = (this.joining.get(visitor) ?? 1) - 1;
    if (n > 0) this.joining.set(visitor, n);
    else {
      this.joining.delete(visitor);
      this.early.delete(visitor);
    }
  }

  get size(): number {
    return this.waiters.size;
  }

  /**
   * Parks `visitor` (in line at `position` by `clock`) until admitted; rejects after `waitMs`
   * (`WaitingRoomTimeoutError`) or when `signal` aborts (its reason).
   */
  park(
    visitor: string,
    position: number,
    clock: RoomClock,
    waitMs: number,
    signal: AbortSignal | undefined,
    onProgress: ((status: WaitingRoomStatus) => void) | undefined,
  ): Promise<WaitingRoomStatus> {
    if (this.closed) {
      // Its join was in flight when the module shut down.
      this.joined(visitor);
      this.unpark(visitor);
      return Promise.reject(shuttingDown());
    }
    // Admitted by a call made after its join (the reply came after the message): admitted now.
    const early = this.early.get(visitor);
    if (early && early.redisNow >= clock.redisNow) {
      this.joined(visitor);
      this.endIfIdle();
      return Promise.resolve({
        admitted: true,
        position: 0,
        etaMs: 0,
        passExpiresInMs: early.passMs,
      });
    }
    return new Promise((resolve, reject) => {
      const onAbort = () => waiter.reject(signal?.reason);
      const timer = setTimeout(
        () =>
          waiter.reject(new WaitingRoomTimeoutError(this.room, visitor, waitMs, waiter.position)),
        waitMs,
      );
      const waiter: Waiter = {
        visitor,
        position,
        asOf: clock.redisNow,
        onProgress,
        told: position,
        resolve: (status) => {
          waiter.end();
          resolve(status);
        },
        reject: (err) => {
          // Queued before the waiter goes: the watch then stays until the unpark is answered.
          this.unpark(visitor);
          waiter.end();
          reject(err);
        },
        end: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          this.remove(waiter);
        },
      };
      let same = this.waiters.get(visitor);
      if (!same) this.waiters.set(visitor, (same = new Set()));
      same.add(waiter);
      this.joined(visitor);
      // A message heard while it joined may carry a newer clock than its join's reply.
      this.setClock(clock, true);
      this.start();
      // Aborted while it joined: it ends now, unparked (and the room's watch, if it was the last).
      if (signal?.aborted) waiter.reject(signal.reason);
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * The ETA of a visitor at `position`, in ms, by `clock` (read `sinceMs` ago): its turn on the
   * room's clock; when admissions come in batches, the first admission call at or after it (one
   * every `MIN_ADVANCE_GAP_MS` from the last one, or from the next admission when that is later).
   */
  static eta(clock: RoomClock, position: number, sinceMs = 0): number | null {
    if (clock.rate <= 0) return null;
    const interval = 1000 / clock.rate;
    let turn = clock.next + (position - 1) * interval;
    if (interval < MIN_ADVANCE_GAP_MS) {
      const gap = MIN_ADVANCE_GAP_MS;
      const from = clock.next > clock.lastCall + gap ? clock.next : clock.lastCall;
      turn = from + Math.ceil((turn - from) / gap) * gap;
    }
    return Math.max(0, Math.round(turn - clock.redisNow - sinceMs));
  }

  /**
   * Rejects every local visitor (the module shuts down), and those whose join is in flight when
   * it comes back; they keep their places for `absentMs`.
   */
  async close(): Promise<void> {
    this.closed = true;
    const err = shuttingDown();
    for (const same of [...this.waiters.values()]) for (const w of [...same]) w.reject(err);
    this.stop();
    await this.flushUnpark();
  }

  /** A visitor stopped waiting here unadmitted: unparked with the others of this tick. */
  private unpark(visitor: string): void {
    if (this.unparking.push(visitor) === 1) setImmediateUnfaked(() => void this.flushUnpark());
  }

  private async flushUnpark(): Promise<void> {
    // A visitor that waits here again (a page that reconnected) stays parked: its other wait
    // keeps its place, and ends it in turn.
    const visitors = [...new Set([...this.owed, ...this.unparking])].filter(
      (v) => !this.waiters.has(v) && !this.joining.has(v),
    );
    this.owed = [];
    this.unparking = [];
    if (visitors.length > 0) {
      this.flushing++;
      try {
        await this.store.unpark(this.keys, this.instance, visitors);
      } catch {
        // Refused or not answered (it may still run: sending it again is harmless).
        this.owed.push(...visitors);
      } finally {
        this.flushing--;
      }
    }
    this.endIfIdle();
  }

  private start(): void {
    if (!this.progressTimer) {
      this.progressTimer = setInterval(() => this.tellProgress(), PROGRESS_EVERY_MS);
      this.progressTimer.unref();
    }
    this.schedule();
  }

  private stop(): void {
    clearTimeout(this.retryTimer);
    clearTimeout(this.advanceTimer);
    clearInterval(this.presenceTimer);
    clearInterval(this.progressTimer);
    this.advanceTimer = this.presenceTimer = this.progressTimer = this.retryTimer = undefined;
    this.unlisten?.();
    this.unlisten = undefined;
    this.listening = undefined;
  }

  private remove(waiter: Waiter): void {
    const same = this.waiters.get(waiter.visitor);
    if (!same?.delete(waiter)) return;
    if (same.size === 0) this.waiters.delete(waiter.visitor);
    this.endIfIdle();
  }

  private endIfIdle(): void {
    if (this.waiters.size > 0 || this.pending > 0 || this.ended) return;
    this.stop();
    // An unpark to send this tick, or in flight: its end looks again.
    if (this.unparking.length > 0 || this.flushing > 0) return;
    if (this.owed.length > 0 && !this.closed) {
      // The lease is no longer renewed and runs out within `absentMs`; until then a wait that
      // comes here would renew it for the owed visitors too: the watch stays and tries again.
      const absent = this.clock?.absent ?? MIN_ABSENT_MS;
      this.idleSince ||= Date.now();
      if (Date.now() - this.idleSince <= absent) {
        this.retryTimer = setTimeout(() => void this.flushUnpark(), Math.floor(absent / 3));
        this.retryTimer.unref();
        return;
      }
      // The lease ran out: the room's next call ends their parking (seen a third of `absentMs`
      // after its last renewal), as for an instance that crashed.
      this.owed = [];
    }
    this.ended = true;
    this.onEmpty();
  }

  /**
   * Takes the room's clock from a reply or message (`onlyNewer`: unless the clock held is of a
   * later Redis time); (re)starts the presence timer for its `absentMs`.
   */
  private setClock(clock: RoomClock, onlyNewer = false): void {
    if (onlyNewer && this.clock && this.clock.redisNow > clock.redisNow) clock = this.clock;
    const every = Math.floor(clock.absent / 3);
    if (this.waiters.size > 0 && (!this.presenceTimer || this.clock?.absent !== clock.absent)) {
      clearInterval(this.presenceTimer);
      this.presenceTimer = setInterval(() => void this.renewLease(), every);
      this.presenceTimer.unref();
    }
    if (clock === this.clock) return;
    this.clock = clock;
    this.offset = Date.now() - clock.redisNow;
  }

  private onMessage(raw: string): void {
    let m: RoomMessage;
    try {
      m = JSON.parse(raw) as RoomMessage;
    } catch {
      return;
    }
    this.setClock(messageClock(m));
    const admitted = Array.isArray(m.a) ? m.a : [];
    // New settings: every ETA changed.
    if (admitted.length === 0)
      for (const same of this.waiters.values()) for (const w of same) w.told = undefined;
    for (const visitor of admitted) {
      for (const w of [...(this.waiters.get(visitor) ?? [])]) {
        w.resolve({ admitted: true, position: 0, etaMs: 0, passExpiresInMs: m.p });
      }
      if (this.joining.has(visitor)) this.early.set(visitor, { redisNow: m.t, passMs: m.p });
    }
    // Another instance's timer call admits for this one too: the gap between calls is the
    // room's (this instance's own call set it when it started; other calls keep the pace).
    if (admitted.length > 0 && m.i !== '') {
      this.leading = m.i === this.instance;
      if (!this.leading) this.advanceFrom = Date.now() + MIN_ADVANCE_GAP_MS + FOLLOWER_DELAY_MS;
    }
    // Everyone admitted stood ahead of every visitor still in line.
    if (admitted.length > 0) {
      for (const same of this.waiters.values()) {
        for (const w of same) {
          if (m.t > w.asOf) w.position = Math.max(1, w.position - admitted.length);
        }
      }
    }
    this.schedule();
  }

  /**
   * Sets the one admission timer: when, by the room's clock, the first local visitor's turn
   * comes (the room's next admission, for the instance leading the batches: its calls admit every
   * instance's visitors at an even pace). A position that is high (visitors ahead left) only
   * makes it late, and a late call admits every visitor that is due.
   */
  private schedule(): void {
    clearTimeout(this.advanceTimer);
    this.advanceTimer = undefined;
    const clock = this.clock;
    if (!clock || clock.rate <= 0 || this.waiters.size === 0) return;
    let first = Infinity;
    for (const same of this.waiters.values())
      for (const w of same) first = Math.min(first, w.position);
    const interval = 1000 / clock.rate;
    const lead = this.leading && interval < MIN_ADVANCE_GAP_MS;
    const due = clock.next + this.offset + (lead ? 0 : (first - 1) * interval);
    const delay = Math.ceil(Math.max(0, due - Date.now(), this.advanceFrom - Date.now()));
    // Node fires a longer timer after 1 ms: a turn more than MAX_TIMER_MS (~24.8 days) away is
    // only looked at again then (the lease renewals keep the clock current meanwhile).
    this.advanceTimer =
      delay > MAX_TIMER_MS
        ? setTimeout(() => this.schedule(), MAX_TIMER_MS)
        : setTimeout(() => void this.advance(), delay);
    this.advanceTimer.unref();
  }

  private async advance(): Promise<void> {
    if (this.advancing) return;
    this.advancing = true;
    this.advanceFrom = Date.now() + MIN_ADVANCE_GAP_MS;
    try {
      const clock = await this.store.advance(this.room, this.keys, this.instance);
      this.setClock(clock);
      // The call admitted its most (1,000) and more are due already (a rate above 2,500 a
      // second): the next call comes at once, not after the gap.
      if (clock.next < clock.redisNow) this.advanceFrom = 0;
    } catch (err) {
      this.failAll(err);
    } finally {
      this.advancing = false;
    }
    this.schedule();
  }

  /** Renews this instance's lease, which keeps every local visitor's place. */
  private async renewLease(): Promise<void> {
    if (this.waiters.size === 0) return;
    if (this.owed.length > 0) {
      // First: this renewal would keep them parked.
      await this.flushUnpark();
      if (this.waiters.size === 0) return;
    }
    try {
      const { clock, held } = await this.store.lease(this.room, this.keys, this.instance);
      this.setClock(clock);
      if (!held) await this.sync();
    } catch (err) {
      this.failAll(err);
    }
  }

  /**
   * Parks every local visitor again and sets each one's position from Redis: after the channel
   * was subscribed again (admissions published meanwhile were lost), or when the lease had run
   * out (this instance could not reach Redis for `absentMs`).
   */
  private async sync(): Promise<void> {
    if (this.syncing || this.waiters.size === 0) return;
    this.syncing = true;
    try {
      // A visitor whose wait ends meanwhile (between two batches of 1,000) is left out of the
      // later batches: its unpark, sent at once, would run first, and it would be parked again.
      const { clock, presence } = await this.store.presence(
        this.room,
        this.keys,
        this.instance,
        [...this.waiters.keys()],
        (visitor) => this.waiters.has(visitor),
      );
      this.setClock(clock);
      for (const [visitor, p] of presence) this.apply(visitor, p, clock.redisNow);
    } catch (err) {
      this.failAll(err);
    } finally {
      this.syncing = false;
    }
    this.schedule();
  }

  private apply(visitor: string, p: Presence, redisNow: number): void {
    for (const w of [...(this.waiters.get(visitor) ?? [])]) {
      if (p.kind === 'admitted') {
        w.resolve({ admitted: true, position: 0, etaMs: 0, passExpiresInMs: p.passMs });
      } else if (p.kind === 'lost') {
        w.reject(new WaitingRoomPlaceLostError(this.room, visitor));
      } else {
        w.position = p.position;
        w.asOf = redisNow;
      }
    }
  }

  /**
   * A call failed: a room that is no longer open ends every wait; anything else (Redis out of
   * reach) is tried again at the next timer, and the visitors keep waiting until their `waitMs`.
   */
  private failAll(err: unknown): void {
    if (!(err instanceof Error) || err.name !== 'WaitingRoomNotOpenError') return;
    for (const same of [...this.waiters.values()]) for (const w of [...same]) w.reject(err);
  }

  /**
   * Calls the `onProgress` of each waiter whose position changed. One that throws is logged and
   * ignored: the others are still told, and its wait goes on.
   */
  private tellProgress(): void {
    const clock = this.clock;
    if (!clock) return;
    const since = Date.now() - this.offset - clock.redisNow;
    for (const same of this.waiters.values()) {
      for (const w of same) {
        if (!w.onProgress || w.told === w.position) continue;
        w.told = w.position;
        try {
          w.onProgress({
            admitted: false,
            position: w.position,
            etaMs: RoomWatch.eta(clock, w.position, since),
            passExpiresInMs: 0,
          });
        } catch (err) {
          this.logger.error(
            `waiting room '${this.room}': onProgress of visitor '${w.visitor}' threw: ${err instanceof Error ? err.message : String(err)}`,
          );
        }
      }
    }
  }
}

/** What a wait of a module that shuts down rejects with. */
export function shuttingDown(): RedisUnavailableError {
  return new RedisUnavailableError('waiting room wait', 'the module is shutting down');
}
