import { LockTimeoutError } from '../errors/lock-timeout.error';
import type { ResolvedLockOptions } from '../options/resolve-options';
import { LocalLine, type LocalWaiter } from '../waiting/local-line';
import type { LineRenewal, RenewedPlace } from '../waiting/line-renewal';
import type { HandoffKind } from '../observability/metrics';
import type { Lock, LockCohortRef } from './lock';
import { waiterChannel, type LockRedisKeys } from './lock-keys';
import {
  entrySpec,
  LINE_ENTRY_TTL_MS,
  type LineEntry,
  type LineStatus,
  type LockAttempt,
  type LockHandoff,
  type LockRejoin,
  type LockStore,
} from './lock-store';

/**
 * The holder's remaining TTL as of now, from the latest attempt that saw it: its PTTL then, less
 * the time since that attempt was sent (so never more than the TTL left in Redis, unless the
 * holder extended it since); `-1` (no TTL) and `-2` (free, others first) as the attempt said.
 * @param attempt the latest attempt that was refused
 * @param now epoch ms
 * @default now Date.now()
 */
export function holderRemainingMs(attempt: LockAttempt, now = Date.now()): number {
  return attempt.wait < 0 ? attempt.wait : Math.max(0, attempt.wait - (now - attempt.sentAt));
}

/** What a waiting acquisition ends with (a timeout is returned, not thrown). */
export type Obtained = Lock | LockTimeoutError;

/** What a grant was made with: the TTL Redis keeps it for, and whether it drew a new fence. */
type GrantSpec = Pick<ResolvedLockOptions, 'ttlMs' | 'fencing'>;

/**
 * Whether a grant made with `spec` (undefined: not known) serves a caller with options `o` as it
 * is: its TTL, and a new fence if it asks for one (a fence it does not want is reported as 0).
 */
function serves(spec: GrantSpec | undefined, o: ResolvedLockOptions): boolean {
  return spec !== undefined && spec.ttlMs === o.ttlMs && (spec.fencing || !o.fencing);
}

/** What a cohort needs from the service that owns it. */
export interface CohortHost {
  readonly store: LockStore;
  readonly renewal: LineRenewal<LineEntry, LineStatus>;
  /** Bound of consecutive local handoffs while other processes wait. */
  readonly maxLocalHandoffs: number;
  /** The instance's tag, the head of its tokens (names its waiter channels: `waiterChannel`). */
  readonly tag: string;
  newToken(): string;
  /** Creates the Lock handle of a grant and registers it as held. */
  grant(
    key: LockRedisKeys,
    token: string,
    o: ResolvedLockOptions,
    fence: number,
    expiresAt: number,
    cohort: LockCohort,
  ): Lock;
  /**
   * The holder's `expiresAt` of a grant Redis keeps for `ms` after a command sent at `sentAt`
   * (less the clock-drift allowance, lib/waiting/grant-deadline.ts).
   */
  deadline(sentAt: number, ms: number): number;
  /** Forgets a granted lock that no caller took (it was passed on). */
  forget(lock: Lock): void;
  listen(channel: string, onMessage: (message: string) => void): Promise<() => void>;
  /** Whether `channel` is subscribed already (a `listen` on it costs no round trip). */
  isSubscribed(channel: string): boolean;
  /** The cohort has nobody holding or waiting: forget it. */
  dispose(cohort: LockCohort): void;
  /** A background step failed (logged; the waiters are told or retried). */
  warn(what: string, err: unknown): void;
  /** Recent hold time of `key` in this process (ms), if any was seen. */
  holdTime(key: LockRedisKeys): number | undefined;
  /** A waiting caller got `lock` by a handoff (metrics). */
  handedOff(lock: Lock, kind: HandoffKind): void;
}

/**
 * The callers of one process that want one lock (lock cohorting: Dice, Marathe & Shavit, PPoPP
 * 2012). They wait in an in-process FIFO; only the process stands in the Redis line, with one
 * entry renewed by the process-wide heartbeat. When the process gets the lock (handed over by a
 * release, or by its own attempt) the first local caller holds it; its release passes the lock to
 * the next local caller in one round trip (`handoff.lua`: own token, full TTL, new fence) without
 * waking another process, at most `maxLocalHandoffs` times in a row while other processes wait.
 * Then the release hands the lock to the Redis line and puts the process at its end (`rejoin`).
 *
 * With `maxLocalHandoffs: 0` every caller has a cohort of its own, so it stands in the Redis line
 * itself; the waiting machinery (heartbeat, messages) is the same.
 */
export class LockCohort implements RenewedPlace<LineEntry, LineStatus>, LockCohortRef {
  /** The local caller holding the lock now. */
  private holder?: Lock;
  private line?: LocalLine<ResolvedLockOptions, Obtained>;
  /** The token of this process's entry in the Redis line, while it stands there. */
  private lineToken?: string;
  /**
   * Line tokens given up lately (`leaveLineLocally`), no caller got a lock for them: a call with
   * one that Redis runs after its leave (an attempt answered NOSCRIPT is sent again behind it)
   * puts it back in line or grants it the lock, and is undone by leaving again (`leftAgain`). A
   * few: such a reply comes within a round trip or two of the leave.
   */
  private readonly givenUp = new Set<string>();
  /**
   * The TTL and fencing every write of the line entry asked for (the join, checks again, the
   * heartbeat's renewals, each with the first local caller's options then), undefined once they
   * differed: what a grant to the entry is made with, when nothing more exact is known.
   */
  private lineSpec?: GrantSpec;
  /** The last attempt made with `lineToken` (dates a handoff message). */
  private lastAttempt?: LockAttempt;
  /** When the request that put `lineToken` in line was sent (dates a message before its reply). */
  private joinSentAt = 0;
  /** A wake-up message came while a round trip was running: check again after it. */
  private recheckPending = false;
  /** The first caller's attempt, while it runs (nothing is known about the lock yet). */
  private firstAttempt?: Promise<LockAttempt>;
  /**
   * Round trips on behalf of the cohort in flight. More than one at a time: a handoff message can
   * make this process the holder while a check of its place is still out, and the holder passes
   * the lock on before that reply comes; the cohort decides its next step only when none is.
   */
  private inFlight = 0;
  /** Checks again sent with the line token (`recheck`). */
  private checksSent = 0;
  /**
   * `checksSent` when the heartbeat took `entry()`: a check sent after the renewal ran after it in
   * Redis (one connection), so its reply, not the renewal's status, tells where the entry stands.
   */
  private checksAtRenewal = 0;
  private localHandoffs = 0;
  private othersWaiting = false;
  private unlisten?: () => void;
  private retryTimer?: NodeJS.Timeout;
  private holderTimer?: NodeJS.Timeout;
  private disposed = false;
  /** The module is shutting down: nothing new starts. */
  private closed = false;
  /** Why it closed (`close`): what a caller that would wait here from then on is told. */
  private closeReason: unknown;

  /** Where releases tell this instance that it was handed the lock (or woken). */
  private readonly waiterChannel: string;

  constructor(
    private readonly host: CohortHost,
    readonly key: LockRedisKeys,
  ) {
    this.waiterChannel = waiterChannel(key.channel, host.tag);
  }

  /** How long the holder holds the lock at most, as far as this process knows. */
  private holderMs(): number | undefined {
    if (this.holder) return Math.max(0, this.holder.expiresAt - Date.now());
    return this.lastAttempt && holderRemainingMs(this.lastAttempt);
  }

  /** A round trip on behalf of the cohort is in flight: its outcome is not known yet. */
  private get busy(): boolean {
    return this.inFlight > 0;
  }

  /** Callers of this process waiting for the lock (not counting the holder). */
  get waiting(): number {
    return this.line?.pending ?? 0;
  }

  /** Nobody of this process holds, waits or stands in line. */
  get idle(): boolean {
    return !this.holder && !this.busy && !this.lineToken && !this.line?.first();
  }

  /**
   * Acquires for one caller: the first caller of an idle cohort tries Redis at once; the others
   * wait in the local FIFO (a `waitMs: 0` caller gives up at once when the lock is surely taken).
   */
  acquire(o: ResolvedLockOptions, started: number): Promise<Obtained> {
    // A local holder whose lock ran out unreleased holds nothing any more.
    if (this.holder?.isLost) this.lost(this.holder);
    if (this.idle) {
      // Still subscribed from a recent wait (the lock is contended): the first attempt joins the
      // line at once when it is refused, one script instead of a try and then a join.
      if (o.waitMs === 0 || !this.host.isSubscribed(this.waiterChannel)) {
        return this.tryFirst(o, started);
      }
      const p = this.enqueue(o, started, false);
      this.drive();
      return p;
    }
    if (o.waitMs === 0) {
      // Held here or queued behind another process: surely taken. Only an attempt in flight
      // leaves it open (it may fail, e.g. Redis unreachable): then try too.
      return this.holder || this.lineToken ? Promise.resolve(this.timeout(0)) : this.tryOnce(o);
    }
    const p = this.enqueue(o, started, false);
    this.watchHolder();
    this.drive();
    return p;
  }

  /**
   * Releases the lock `lock` of this cohort: to the next local caller (local handoff), or to the
   * Redis line with this process queuing again at its end (bound reached), or for good.
   */
  async release(lock: Lock): Promise<boolean> {
    if (this.holder !== lock) return this.host.store.release([this.key], lock.token);
    this.holder = undefined;
    this.unwatchHolder();
    this.inFlight++;
    try {
      let token = lock.token;
      let released: boolean | undefined;
      for (;;) {
        const next = this.line?.shift();
        if (!next) {
          const ok = await this.host.store.release([this.key], token);
          return released ?? ok;
        }
        if (this.localHandoffs >= this.host.maxLocalHandoffs && this.othersWaiting) {
          this.line!.unshift(next);
          const ok = await this.rejoin(token, next.options);
          return released ?? ok;
        }
        const o = next.options;
        const newToken = this.host.newToken();
        let h: LockHandoff;
        try {
          h = await this.host.store.handoff(this.key, token, newToken, o);
        } catch (err) {
          // Whether it ran is not known (it may still run late): either token may hold the lock,
          // both are given back, as in `regrant`.
          if (!next.settled) this.putBack(next);
          this.giveBack(token);
          this.giveBack(newToken);
          throw err;
        }
        if (!h.handed) {
          // Our lock lapsed: the next caller queues through Redis.
          if (!next.settled) this.putBack(next);
          return released ?? false;
        }
        released ??= true;
        this.othersWaiting = h.others;
        this.localHandoffs = h.others ? this.localHandoffs + 1 : 0;
        const nextLock = this.host.grant(
          this.key,
          newToken,
          o,
          h.fence,
          this.host.deadline(h.sentAt, o.ttlMs),
          this,
        );
        if (next.resolve(nextLock)) {
          this.host.handedOff(nextLock, 'local');
          this.hold(nextLock, h.others);
          return released;
        }
        // Its wait ran out during the round trip: pass the lock on in turn.
        this.host.forget(nextLock);
        token = newToken;
      }
    } finally {
      this.inFlight--;
      this.drive();
    }
  }

  /**
   * Module shutdown: callers still waiting are told (`reason`), the process leaves the Redis line,
   * and a lock handed to it meanwhile is released, so that no other instance waits on a lock
   * nobody will use. The holder's own lock is released by the service.
   */
  async close(reason: unknown): Promise<void> {
    this.closed = true;
    this.closeReason = reason;
    this.unwatchHolder();
    this.line?.rejectAll(reason);
    const token = this.lineToken;
    this.leaveLineLocally();
    try {
      if (token) await this.host.store.leaveLine(this.key, token);
    } catch (err) {
      // Unanswered: a late run still leaves and gives back; one never run leaves the entry to
      // lapse by its deadline, a lock handed to it to its TTL.
      this.host.warn(`lock ${this.key.name}: leaving the line at shutdown failed`, err);
    } finally {
      this.unlisten?.();
      this.unlisten = undefined;
    }
  }

  /** The lock `lock` was lost (an extension found it gone): the next local caller goes on. */
  lost(lock: Lock): void {
    if (this.holder !== lock) return;
    this.holder = undefined;
    this.unwatchHolder();
    this.drive();
  }

  /** @internal what the heartbeat renews */
  entry(): LineEntry | undefined {
    const first = this.line?.first();
    if (!this.lineToken || !first || this.busy) return undefined;
    this.checksAtRenewal = this.checksSent;
    this.noteSpec(first.options);
    return { key: this.key, token: this.lineToken, spec: entrySpec(first.options) };
  }

  /**
   * @internal the heartbeat could not reach Redis: the callers waiting here get the error at once
   * (as an attempt of theirs would), instead of waiting through the outage
   */
  onRenewFailed(entry: LineEntry, err: unknown): void {
    if (!this.renewalCurrent(entry)) return;
    this.leaveLineLocally();
    // The renewal may still run (late): the entry must not outlive the callers that gave up.
    this.abandonLine(entry.token);
    this.line?.rejectAll(err);
    this.drive();
  }

  /** @internal what the heartbeat found */
  onRenewed(entry: LineEntry, status: LineStatus): void {
    // A stale 'gone' (a check again put the entry back since) would leave that entry in the line,
    // unrenewed, ahead of this process's new one: everybody behind it would wait for its deadline.
    if (!this.renewalCurrent(entry)) return;
    if (status.state === 'gone') {
      // Our entry lapsed (frozen or cut off for longer than its deadline): queue again.
      this.leaveLineLocally();
      this.drive();
    } else if (status.state === 'handed') {
      // The handoff message was lost; the heartbeat found the lock ours.
      this.obtained(entry.token, status.fence, status.expiresAt, true, true);
    } else if (status.state === 'free') {
      // The holder let the lock lapse (crashed, frozen): the first in line takes it now.
      void this.recheck();
    }
  }

  /** What the renewal of `entry` found still holds: nothing was sent for the entry since. */
  private renewalCurrent(entry: LineEntry): boolean {
    return entry.token === this.lineToken && !this.busy && this.checksSent === this.checksAtRenewal;
  }

  /** The line entry is written again with `o`'s options: `lineSpec` holds while all agreed. */
  private noteSpec(o: GrantSpec): void {
    const spec = this.lineSpec;
    if (spec && (spec.ttlMs !== o.ttlMs || spec.fencing !== o.fencing)) this.lineSpec = undefined;
  }

  private async tryFirst(o: ResolvedLockOptions, started: number): Promise<Obtained> {
    const token = this.host.newToken();
    let attempt: LockAttempt;
    try {
      const pending = this.host.store.attempt([this.key], token, o, 'none');
      this.firstAttempt = pending;
      attempt = await this.roundTrip(() => pending);
    } catch (err) {
      this.firstAttempt = undefined;
      // Callers queued behind an attempt that failed share its failure (Redis unreachable).
      this.line?.rejectAll(err);
      this.drive();
      throw err;
    }
    this.firstAttempt = undefined;
    if (attempt.granted) {
      const lock = this.host.grant(this.key, token, o, attempt.fences[0], attempt.expiresAt, this);
      this.hold(lock, attempt.others === true);
      this.drive();
      return lock;
    }
    this.lastAttempt = attempt;
    if (o.waitMs === 0) {
      this.drive();
      return this.timeout(0, attempt.wait);
    }
    const p = this.enqueue(o, started, true);
    this.drive();
    // Awaited rather than returned: an async function that returns a promise settles its own a
    // tick or two after it, and this is the path a woken waiter resumes through.
    return await p;
  }

  /** One attempt beside another in flight (a `waitMs: 0` caller that came meanwhile). */
  private async tryOnce(o: ResolvedLockOptions): Promise<Obtained> {
    const token = this.host.newToken();
    const attempt = await this.host.store.attempt([this.key], token, o, 'none');
    if (!attempt.granted) return this.timeout(0, attempt.wait);
    const lock = this.host.grant(this.key, token, o, attempt.fences[0], attempt.expiresAt, this);
    this.hold(lock, attempt.others === true);
    this.drive();
    return lock;
  }

  private enqueue(o: ResolvedLockOptions, started: number, first: boolean): Promise<Obtained> {
    // Closed while the caller's first attempt was out: nothing would move a closed cohort's line
    // on, so the caller would wait out its whole waitMs, and the shutdown with it.
    if (this.closed) return Promise.reject(this.closeReason);
    this.line ??= new LocalLine(() => this.drive());
    const left = o.waitMs - (Date.now() - started);
    return this.line.add(o, left, o.signal, () => this.timeoutOrFailure(started), first);
  }

  /** Decides the cohort's next step after any change; does nothing while a round trip runs. */
  private drive(): void {
    if (this.busy || this.holder || this.disposed || this.closed) return;
    const first = this.line?.first();
    if (first && this.lineToken && this.recheckPending) void this.recheck();
    else if (first && !this.lineToken) void this.join(first.options);
    else if (!first && this.lineToken) void this.leave();
    else if (!first) this.dispose();
  }

  /** Puts the process in the Redis line for its first local caller (`o`). */
  private async join(o: ResolvedLockOptions): Promise<void> {
    const token = this.host.newToken();
    let attempt: LockAttempt | undefined;
    try {
      attempt = await this.roundTrip(async () => {
        await this.subscribe();
        if (this.closed) return undefined;
        // In line from the moment the request is sent: its handoff message may come before its
        // reply.
        this.lineToken = token;
        this.lineSpec = o;
        this.lastAttempt = undefined;
        this.joinSentAt = Date.now();
        // Answered late: Redis ran it after all, maybe after the leave sent on its failure.
        return this.host.store.attempt([this.key], token, o, 'line', () => this.leftAgain(token));
      });
    } catch (err) {
      // Still in line on it: every caller of the cohort would meet the same failure, tell them
      // all. A lock a message handed the token before the failure went to a caller, who keeps
      // it, and the place is no longer needed: the callers behind that holder keep waiting for
      // its release (or their waitMs), as they would had the reply come on time.
      if (token === this.lineToken) {
        this.leaveLineLocally();
        this.abandonLine(token);
        this.line?.rejectAll(err);
      }
    }
    // Handed over already (by a message that beat the reply), or given up meanwhile.
    if (attempt && token !== this.lineToken) this.leftAgain(token);
    if (attempt && token === this.lineToken) {
      if (attempt.granted) {
        this.obtained(token, attempt.fences[0], attempt.expiresAt, attempt.others === true);
      } else {
        this.host.renewal.add(this);
        this.waitFor(attempt);
      }
    }
    this.drive();
  }

  /** Checks again with the line token (a lapsed holder, a wake-up message): keeps the place. */
  private async recheck(): Promise<void> {
    const token = this.lineToken;
    const first = this.line?.first();
    if (!token || !first) return this.drive();
    if (this.busy) {
      // A timer that fires during a round trip: check once that is over.
      this.recheckPending = true;
      return;
    }
    this.recheckPending = false;
    this.checksSent++;
    // Granted by this check, or found handed to the entry before it (its spec as last written).
    this.noteSpec(first.options);
    let attempt: LockAttempt | undefined;
    try {
      attempt = await this.roundTrip(() =>
        this.host.store.attempt([this.key], token, first.options, 'line', () =>
          this.leftAgain(token),
        ),
      );
    } catch (err) {
      // The token keeps its place (the heartbeat renews it): a grant by a late run of this check,
      // or by a message meanwhile, is found by the next check or renewal. It is not released,
      // unless the process gave its place up by then (`leftAgain`, on the late reply).
      this.host.warn(`lock ${this.key.name}: checking the line failed`, err);
    }
    if (token !== this.lineToken) {
      if (attempt) this.leftAgain(token);
      return this.drive();
    }
    if (attempt?.granted) {
      this.obtained(token, attempt.fences[0], attempt.expiresAt, attempt.others === true);
    } else if (attempt) {
      this.waitFor(attempt);
    } else {
      this.retryIn(LINE_ENTRY_TTL_MS);
    }
    this.drive();
  }

  /** In line: a release message, the heartbeat, or the holder's PTTL running out moves us on. */
  private waitFor(attempt: LockAttempt): void {
    this.lastAttempt = attempt;
    // The holder's PTTL bounds a lost message (and finds a crashed holder's lock lapsed);
    // a free lock with another waiter first is checked again after an entry's lifetime.
    if (attempt.wait >= 0) this.retryIn(attempt.wait + 1);
    else if (attempt.wait === -2) this.retryIn(LINE_ENTRY_TTL_MS);
  }

  private retryIn(ms: number): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => void this.recheck(), ms);
    this.retryTimer.unref();
  }

  private onMessage = (message: string): void => {
    const token = this.lineToken;
    if (!token) return;
    if (message.startsWith(`h ${token} `)) {
      // Handed to us by release.lua at Redis time `grantedAt`, after our last attempt (at
      // `redisNow`, sent at `sentAt`): so it expires no sooner than this. Before that attempt's
      // reply, the grant is known to come after the request was sent.
      const [, , fence, grantedAt, ttl, others] = message.split(' ');
      const last = this.lastAttempt;
      const expiresAt = last
        ? this.host.deadline(last.sentAt, Number(grantedAt) - last.redisNow + Number(ttl))
        : this.host.deadline(this.joinSentAt, Number(ttl));
      const spec = { ttlMs: Number(ttl), fencing: fence !== '0' };
      this.obtained(token, Number(fence), expiresAt, others === '1', true, spec);
    } else if (message === `w ${token}` || message === 'f') {
      if (this.busy) this.recheckPending = true;
      else void this.recheck();
    }
  };

  /**
   * The process holds the lock under `token` (`handed`: by a release's handoff through Redis),
   * granted with `spec`: its first local caller gets it.
   */
  private obtained(
    token: string,
    fence: number,
    expiresAt: number,
    others: boolean,
    handed = false,
    spec = this.lineSpec,
  ): void {
    if (token !== this.lineToken) return;
    if (this.closed) {
      this.leaveLineLocally();
      void this.host.store.release([this.key], token).catch(() => undefined);
      return;
    }
    // Out of the line. Its heartbeat place is left for leave/dispose to drop (the heartbeat skips a
    // place without a line token): a handoff's latency is this path, run cold in a process that
    // was idle, and its caller resumes only after it.
    this.lineToken = undefined;
    this.lastAttempt = undefined;
    this.recheckPending = false;
    clearTimeout(this.retryTimer);
    this.localHandoffs = 0;
    this.give(token, fence, expiresAt, others, spec, handed);
  }

  /**
   * Gives the lock this process holds under `token` (granted with `spec`) to its first local
   * caller, or back when none waits any more.
   */
  private give(
    token: string,
    fence: number,
    expiresAt: number,
    others: boolean,
    spec: GrantSpec | undefined,
    handed: boolean,
  ): void {
    // shift() returns a caller still waiting, and nothing can settle it before resolve().
    const next = this.line?.shift();
    if (!next) {
      this.host.renewal.delete(this);
      // Every caller gave up meanwhile: give the lock back at once.
      this.giveBack(token);
      this.drive();
      return;
    }
    if (!serves(spec, next.options)) {
      // The grant has another caller's TTL or fencing (the entry carries the options of the
      // first caller when it was written, and that one gave up since): not this caller's lock.
      void this.regrant(token, next, handed);
      return;
    }
    const lock = this.host.grant(this.key, token, next.options, fence, expiresAt, this);
    this.hold(lock, others);
    next.resolve(lock);
    if (handed) this.host.handedOff(lock, 'remote');
  }

  /**
   * Passes the lock held under `token` to `next` with its own TTL and a new fence, in one round
   * trip, as a local handoff does (`handoff.lua`). Only callers of different options waiting
   * together cost it: with the same options for all, every grant serves as it is.
   */
  private async regrant(
    token: string,
    next: LocalWaiter<ResolvedLockOptions, Obtained>,
    handed: boolean,
  ): Promise<void> {
    const o = next.options;
    const newToken = this.host.newToken();
    let h: LockHandoff;
    try {
      h = await this.roundTrip(() => this.host.store.handoff(this.key, token, newToken, o));
    } catch (err) {
      // Whether it ran is not known: either token may hold the lock, both are given back. The
      // caller gets the failure, as an attempt of its own would.
      next.reject(err);
      this.giveBack(token);
      this.giveBack(newToken);
      return this.drive();
    }
    if (!h.handed) {
      // The grant lapsed meanwhile: the caller queues through Redis.
      if (!next.settled) this.putBack(next);
      return this.drive();
    }
    const expiresAt = this.host.deadline(h.sentAt, o.ttlMs);
    // Its wait ran out during the round trip: the next caller is given it in turn.
    if (next.settled) return this.give(newToken, h.fence, expiresAt, h.others, o, handed);
    const lock = this.host.grant(this.key, newToken, o, h.fence, expiresAt, this);
    this.hold(lock, h.others);
    next.resolve(lock);
    if (handed) this.host.handedOff(lock, 'remote');
  }

  /** Releases a lock granted to `token` that no caller takes (best effort: else its TTL ends it). */
  private giveBack(token: string): void {
    void this.host.store.release([this.key], token).catch((err) => {
      this.host.warn(`lock ${this.key.name}: returning an unwanted lock failed`, err);
    });
  }

  /**
   * Puts back a caller whose handoff did not happen, at the front; after shutdown nothing would
   * move the line on, so it is told the shutdown's reason instead.
   */
  private putBack(next: LocalWaiter<ResolvedLockOptions, Obtained>): void {
    if (this.closed) next.reject(this.closeReason);
    else this.line!.unshift(next);
  }

  /** Bound reached: the lock goes to the Redis line, and this process queues at its end. */
  private async rejoin(heldToken: string, o: ResolvedLockOptions): Promise<boolean> {
    const token = this.host.newToken();
    await this.subscribe();
    this.lineToken = token;
    this.lineSpec = o;
    this.joinSentAt = Date.now();
    let r: LockRejoin;
    try {
      r = await this.host.store.rejoin(
        this.key,
        heldToken,
        { key: this.key, token, spec: entrySpec(o) },
        () => this.leftAgain(token),
      );
    } catch (err) {
      // It may still run late, putting the token in line or granting it the lock: both undone.
      if (token === this.lineToken) {
        this.leaveLineLocally();
        this.abandonLine(token);
      }
      throw err;
    }
    if (!r.released) {
      if (token === this.lineToken) this.leaveLineLocally();
      return false;
    }
    // Handed over already by a message that beat the reply, or given up meanwhile.
    if (token !== this.lineToken) {
      this.leftAgain(token);
      return true;
    }
    this.localHandoffs = 0;
    this.lastAttempt = {
      granted: false,
      fences: [],
      expiresAt: 0,
      redisNow: r.redisNow,
      sentAt: r.sentAt,
      wait: -1,
    };
    if (r.outcome === 'granted') {
      this.obtained(token, r.fence, this.host.deadline(r.sentAt, o.ttlMs), false);
    } else {
      this.host.renewal.add(this);
      // No PTTL is known: the heartbeat bounds a lost message (one period).
    }
    return true;
  }

  /** No local caller waits any more: leave the Redis line (returning a lock handed meanwhile). */
  private async leave(): Promise<void> {
    const token = this.lineToken!;
    this.leaveLineLocally();
    try {
      // Gives back a lock handed to the token meanwhile in the same call, so a late run of it
      // (after a stall) still frees the lock.
      await this.roundTrip(() => this.host.store.leaveLine(this.key, token));
    } catch (err) {
      // Unanswered: a late run still leaves and gives back; one never run leaves the entry to
      // lapse by its deadline, a lock handed to it to its TTL.
      this.host.warn(`lock ${this.key.name}: leaving the line failed`, err);
    } finally {
      this.drive();
    }
  }

  /**
   * Takes the line token `token`, which no caller got, out of the Redis line after a call with it
   * failed, giving back a lock handed to it (best effort: else the entry lapses by its deadline, a
   * lock by its TTL). Sent on the same connection behind that call, it runs after it.
   */
  private abandonLine(token: string): void {
    void this.host.store.leaveLine(this.key, token).catch((err) => {
      this.host.warn(`lock ${this.key.name}: leaving the line failed`, err);
    });
  }

  /**
   * A reply to a call with `token` came after the process gave that token up: the call may have
   * run after the leave (see `givenUp`), so it leaves once more. Nothing for a token a caller got.
   */
  private leftAgain(token: string): void {
    if (this.givenUp.delete(token)) this.abandonLine(token);
  }

  /** The process gives its place up: no caller gets a lock for its token (`givenUp`). */
  private leaveLineLocally(): void {
    if (this.lineToken !== undefined) {
      if (this.givenUp.size >= 8) this.givenUp.delete(this.givenUp.values().next().value!);
      this.givenUp.add(this.lineToken);
    }
    this.lineToken = undefined;
    this.lineSpec = undefined;
    this.lastAttempt = undefined;
    this.recheckPending = false;
    clearTimeout(this.retryTimer);
    this.host.renewal.delete(this);
  }

  private hold(lock: Lock, others: boolean): void {
    this.holder = lock;
    this.othersWaiting = others;
    this.watchHolder();
  }

  /**
   * While callers wait behind a local holder, its lock running out (by `expiresAt`) must not
   * stall them: the cohort then goes on as if it had been released.
   */
  private watchHolder(): void {
    const holder = this.holder;
    if (!holder || this.holderTimer || !this.line?.first()) return;
    const check = () => {
      this.holderTimer = undefined;
      if (this.holder !== holder) return;
      if (holder.expiresAt > Date.now()) return this.watchHolder();
      this.lost(holder);
    };
    this.holderTimer = setTimeout(check, Math.max(0, holder.expiresAt - Date.now()) + 1);
    this.holderTimer.unref();
  }

  /**
   * Stops the watch of `watchHolder`. The timer is forgotten too: a cleared one left in place
   * would keep every later holder of the cohort unwatched.
   */
  private unwatchHolder(): void {
    clearTimeout(this.holderTimer);
    this.holderTimer = undefined;
  }

  /** Runs `work` (round trips for the cohort) as in flight: see `inFlight`. */
  private async roundTrip<T>(work: () => Promise<T>): Promise<T> {
    this.inFlight++;
    try {
      return await work();
    } finally {
      this.inFlight--;
    }
  }

  /**
   * Listens on the lock's channel ('f': free, nobody live in line) and on this instance's waiter
   * channel (handoffs and wake-ups meant for it: `waiterChannel`), both subscribed at once.
   */
  private async subscribe(): Promise<void> {
    if (this.unlisten) return;
    const channels = [this.key.channel, this.waiterChannel];
    const listened = await Promise.allSettled(
      channels.map((c) => this.host.listen(c, this.onMessage)),
    );
    const stops = listened.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failed = listened.find((r) => r.status === 'rejected');
    if (failed) {
      // No subscription: the heartbeat and the holder's PTTL still move us on (slower).
      this.host.warn(`lock ${this.key.name}: subscribing failed`, failed.reason);
    }
    if (stops.length > 0) this.unlisten = () => stops.forEach((stop) => stop());
  }

  private dispose(): void {
    if (!this.idle || this.disposed) return;
    this.disposed = true;
    this.unwatchHolder();
    this.leaveLineLocally();
    this.unlisten?.();
    this.unlisten = undefined;
    this.host.dispose(this);
  }

  /**
   * A local caller's wait ran out. While the first attempt is still in flight nothing shows the
   * lock taken: the caller gets that attempt's failure (e.g. Redis unreachable), or then the
   * timeout.
   */
  private timeoutOrFailure(started: number): Obtained | Promise<Obtained> {
    const pending = this.firstAttempt;
    if (!pending || this.holder || this.lineToken) return this.timeout(Date.now() - started);
    return pending.then(() => this.timeout(Date.now() - started));
  }

  private timeout(waited: number, holderMs = this.holderMs()): LockTimeoutError {
    const remaining = holderMs !== undefined && holderMs >= 0 ? holderMs : undefined;
    // Callers ahead: this process's own and one per other process in line (at least).
    const hold = this.host.holdTime(this.key);
    const ahead = (this.line?.pending ?? 0) + (this.lastAttempt?.lineLength ?? 0);
    const expected =
      hold === undefined
        ? undefined
        : Math.min(hold * (ahead + 1), remaining ?? Number.POSITIVE_INFINITY);
    return new LockTimeoutError([this.key.name], waited, remaining, expected);
  }
}
