import { SemaphoreTimeoutError } from '../errors/semaphore-timeout.error';
import { LocalLine } from '../waiting/local-line';
import type { LineRenewal, RenewedPlace } from '../waiting/line-renewal';
import type { Permit } from './permit';
import type { SemaphoreRedisKeys } from './semaphore-keys';
import type { ResolvedSemaphoreOptions } from './semaphore-options';
import {
  permitSpec,
  type PermitEntry,
  type PermitEntryStatus,
  type SemaphoreAttempt,
  type SemaphoreStore,
} from './semaphore-store';

/** What a waiting acquisition ends with (a timeout is returned, not thrown). */
export type PermitOutcome = Permit | SemaphoreTimeoutError;

/** What a line needs from the service that owns it. */
export interface SemaphoreLineHost {
  readonly store: SemaphoreStore;
  readonly renewal: LineRenewal<PermitEntry, PermitEntryStatus>;
  /** Creates the Permit of a grant and registers it as held. */
  grant(
    key: SemaphoreRedisKeys,
    token: string,
    o: ResolvedSemaphoreOptions,
    fence: number,
    expiresAt: number,
  ): Permit;
  /** Nobody of this process waits any more: forget the line. */
  dispose(line: SemaphoreLine): void;
  warn(what: string, err: unknown): void;
}

/**
 * One waiting caller: its own token and place in the Redis line, renewed by the process-wide
 * heartbeat (one call per period for all waiters of the process).
 */
class PermitRequest implements RenewedPlace<PermitEntry, PermitEntryStatus> {
  /** The last attempt's reply (dates a grant message). */
  last?: { sentAt: number; redisNow: number };
  /** When the request that put the token in line was sent (dates a message before its reply). */
  joinSentAt = 0;
  waiting = false;
  /**
   * The caller gave up (deadline, signal, shutdown) and its token left the line. A check of its
   * place answered after that may have run after the leave (a check answered NOSCRIPT is sent again
   * behind what was sent meanwhile), putting the token back in line or granting it permits that
   * nobody holds: each such reply, in time or late, leaves once more (`leftAgain`).
   */
  gaveUp = false;

  constructor(
    readonly line: SemaphoreLine,
    readonly token: string,
    readonly o: ResolvedSemaphoreOptions,
    readonly started: number,
  ) {}

  entry(): PermitEntry | undefined {
    if (!this.waiting) return undefined;
    return { key: this.line.key, token: this.token, spec: permitSpec(this.o) };
  }

  onRenewed(_entry: PermitEntry, status: PermitEntryStatus): void {
    this.line.renewed(this, status);
  }
}

/**
 * The callers of one process waiting for permits of one semaphore. Unlike a lock's cohort, every
 * caller keeps its own entry in the Redis line: a release can hand permits to several waiters at
 * once, and handing a permit to a caller of the releasing process first would pass waiters of
 * other processes, breaking the FIFO order of grants. What the cohort saves is kept: all entries
 * of the process are renewed in one call per period, and one subscription per key carries the
 * grant messages to them.
 */
export class SemaphoreLine {
  private readonly callers = new LocalLine<PermitRequest, PermitOutcome>(() => this.maybeDispose());
  private unlisten?: () => void;
  private subscribing?: Promise<void>;
  private disposed = false;
  /**
   * Grant messages for tokens not (yet) waiting here: one can beat the reply of the attempt that
   * put its token in line (pub/sub is another connection). Bounded; read by `wait`.
   */
  private readonly early = new Map<string, string>();

  constructor(
    private readonly host: SemaphoreLineHost,
    readonly key: SemaphoreRedisKeys,
  ) {}

  /** Callers of this process waiting here. */
  get waiting(): number {
    return this.callers.pending;
  }

  /**
   * Waits for permits: `first` is the caller's first attempt, made with `wait` (so the caller is
   * in line already under `token`).
   */
  wait(token: string, o: ResolvedSemaphoreOptions, started: number, first: SemaphoreAttempt) {
    const request = new PermitRequest(this, token, o, started);
    request.joinSentAt = first.sentAt;
    if ('redisNow' in first) request.last = first;
    request.waiting = true;
    const soonest = 'soonestMs' in first ? first.soonestMs : -1;
    const outcome = this.callers.add(request, o.waitMs - (Date.now() - started), o.signal, () =>
      this.timeout(request, soonest),
    );
    outcome.then(
      (result) => {
        if (!(result instanceof SemaphoreTimeoutError)) return;
        this.giveUp(request);
      },
      () => this.giveUp(request),
    );
    this.host.renewal.add(request);
    const early = this.early.get(token);
    if (early !== undefined) this.onMessage(early);
    else void this.subscribeThenCheck(request);
    return outcome;
  }

  /**
   * Module shutdown: every caller still waiting is told `reason`, and every token leaves the
   * Redis line, giving back permits handed to it meanwhile, so that none is handed to an
   * instance that is going away.
   */
  async close(reason: unknown): Promise<void> {
    const leaving: PermitRequest[] = [];
    for (let w = this.callers.shift(); w; w = this.callers.shift()) {
      const request = w.options;
      if (!request.waiting) continue;
      request.waiting = false;
      request.gaveUp = true;
      this.host.renewal.delete(request);
      leaving.push(request);
      w.reject(reason);
    }
    const left = await Promise.allSettled(
      leaving.map((r) => this.host.store.leaveLine(this.key, r.token)),
    );
    for (const result of left) {
      // Unreachable: the entry lapses by its deadline, permits handed to it by their TTL.
      if (result.status === 'rejected') {
        this.host.warn(
          `semaphore ${this.key.name}: leaving the line at shutdown failed`,
          result.reason,
        );
      }
    }
    this.maybeDispose();
  }

  /** @internal what the heartbeat found for `request` */
  renewed(request: PermitRequest, status: PermitEntryStatus): void {
    if (!request.waiting) return;
    if (status.state === 'granted') this.granted(request, status.fence, status.expiresAt);
    else if (status.state === 'gone') void this.check(request);
  }

  /**
   * Subscribes (once per key), then checks again with the caller's token: a grant published
   * before the subscription was made is found that way (the token keeps its place in line).
   */
  private async subscribeThenCheck(request: PermitRequest): Promise<void> {
    if (!this.unlisten) {
      this.subscribing ??= this.host.store.listen(this.key.channel, this.onMessage).then(
        (unlisten) => {
          if (this.disposed) unlisten();
          else this.unlisten = unlisten;
        },
        (err: unknown) => {
          // No subscription: the heartbeat still finds grants (one period late).
          this.subscribing = undefined;
          this.host.warn(`semaphore ${this.key.name}: subscribing failed`, err);
        },
      );
      await this.subscribing;
      await this.check(request);
    }
  }

  /** Checks with the caller's token (keeps its place, or joins again at the end if lost). */
  private async check(request: PermitRequest): Promise<void> {
    if (!request.waiting) return;
    try {
      const attempt = await this.host.store.acquire(
        this.key,
        request.token,
        request.o,
        true,
        false,
        () => this.leftAgain(request),
      );
      if (!request.waiting) return this.leftAgain(request);
      if (attempt.granted) this.granted(request, attempt.fence, attempt.expiresAt);
      else if ('redisNow' in attempt) request.last = attempt;
    } catch (err) {
      // Nothing to undo: the caller keeps waiting with this token (the heartbeat finds a grant
      // the check made), and giving up leaves the line behind it on the same connection; a late
      // reply after that (Redis may have run the check after the leave) leaves once more.
      this.host.warn(`semaphore ${this.key.name}: checking the line failed`, err);
    }
  }

  private onMessage = (message: string): void => {
    if (!message.startsWith('h ')) return;
    const [, token, fence, grantedAt, ttl] = message.split(' ');
    const waiter = this.callers.find((r) => r.token === token);
    if (!waiter) {
      if (this.early.size >= 64) this.early.delete(this.early.keys().next().value!);
      this.early.set(token, message);
      return;
    }
    const request = waiter.options;
    // Granted at Redis time `grantedAt`, after the last attempt (at `redisNow`, sent at `sentAt`).
    const last = request.last;
    const expiresAt = last
      ? this.host.store.deadline(last.sentAt, Number(grantedAt) - last.redisNow + Number(ttl))
      : this.host.store.deadline(request.joinSentAt, Number(ttl));
    this.granted(request, Number(fence), expiresAt);
  };

  private granted(request: PermitRequest, fence: number, expiresAt: number): void {
    if (!request.waiting) return;
    const waiter = this.callers.find((r) => r === request);
    // Settled meanwhile (timeout, abort): giveUp returns the permits.
    if (!waiter) return;
    request.waiting = false;
    this.host.renewal.delete(request);
    waiter.resolve(this.host.grant(this.key, request.token, request.o, fence, expiresAt));
    this.maybeDispose();
  }

  /** The caller left by its deadline or signal: leave the line, returning permits handed meanwhile. */
  private giveUp(request: PermitRequest): void {
    if (!request.waiting) return;
    request.waiting = false;
    request.gaveUp = true;
    this.host.renewal.delete(request);
    this.leave(request.token);
    this.maybeDispose();
  }

  /**
   * A check of `request`'s place was answered (in time or late): after its caller gave up, Redis
   * may have run it after the leave (see `PermitRequest.gaveUp`), so the token leaves once more.
   * Nothing for a caller that still waits or was granted.
   */
  private leftAgain(request: PermitRequest): void {
    if (request.gaveUp) this.leave(request.token);
  }

  /** Takes `token` out of the line, giving back permits handed to it meanwhile (best effort). */
  private leave(token: string): void {
    this.host.store.leaveLine(this.key, token).catch((err: unknown) => {
      // Unreachable: the entry lapses by its deadline, permits handed to it by their TTL.
      this.host.warn(`semaphore ${this.key.name}: leaving the line failed`, err);
    });
  }

  private maybeDispose(): void {
    if (this.disposed || this.callers.first()) return;
    this.disposed = true;
    this.unlisten?.();
    this.host.dispose(this);
  }

  private timeout(request: PermitRequest, soonestMs: number): SemaphoreTimeoutError {
    return new SemaphoreTimeoutError(
      this.key.name,
      request.o.permits,
      request.o.limit,
      Date.now() - request.started,
      soonestMs >= 0 ? soonestMs : undefined,
    );
  }
}
