import { LockLostError } from '../errors/lock-lost.error';
import type { LockLostEvent } from '../events/redis-lock-event-map';
import type { WaitForReplicasOptions } from '../interfaces/lock-options.interface';
import { GrantLifetime } from '../waiting/grant-lifetime';
import type { LockRedisKeys } from './lock-keys';

/**
 * What a `Lock` handle needs from the service that created it (implemented by `LockHandles`,
 * lock-handles.ts). Its members are internal: the published declarations keep an empty interface.
 */
export interface LockOwner {
  /** @internal */
  releaseLock(lock: Lock): Promise<boolean>;
  /** @internal */
  extendLock(lock: Lock, ttlMs: number): Promise<boolean>;
  /** @internal */
  isHeldLock(lock: Lock): Promise<boolean>;
  /** @internal the lock was found lost (called once per lock) */
  lockLost(lock: Lock, why: LockLostEvent['reason']): void;
}

/**
 * What a single-key lock's local cohort (`LockCohort`, lock-cohort.ts) does for the lock granted
 * through it. Named here so that a `Lock` need not import the cohort; internal like `LockOwner`.
 */
export interface LockCohortRef {
  /** @internal releases `lock`, passing it to the next local caller or to the Redis line */
  release(lock: Lock): Promise<boolean>;
  /** @internal `lock` was found lost: the next local caller goes on */
  lost(lock: Lock): void;
}

/**
 * A lock held by this process: returned by `LockService.acquire`, passed to `withLock` callbacks.
 * Ownership is the random `token`; only its holder can release or extend it.
 */
export class Lock {
  /** The lock names, as given to `acquire`. */
  readonly keys: readonly string[];
  private readonly lifetime: GrantLifetime<LockLostError>;
  /** @internal when this process got the lock (epoch ms): hold times feed `Retry-After` */
  readonly acquiredAt = Date.now();
  /** @internal the `lock` attribute of its metrics */
  label = '(unlabelled)';
  /**
   * @internal Sentinel's default wait (`waitForReplicas` unset): each write of the lock asks the
   * current master's replica count (not the count at the grant: a promotion can come between)
   */
  waitsByDefault = false;

  /**
   * @internal created by LockService. (The constructor is private, so the published types show
   * no way to make a Lock by hand.)
   */
  static create(
    owner: LockOwner,
    redisKeys: readonly LockRedisKeys[],
    token: string,
    fences: readonly number[],
    expiresAt: number,
    ttlMs: number,
    waitForReplicas?: WaitForReplicasOptions,
    cohort?: LockCohortRef,
  ): Lock {
    return new Lock(owner, redisKeys, token, fences, expiresAt, ttlMs, waitForReplicas, cohort);
  }

  private constructor(
    private readonly owner: LockOwner,
    /** @internal */ readonly redisKeys: readonly LockRedisKeys[],
    /** Random value that identifies this acquisition in Redis. */
    readonly token: string,
    /**
     * Fencing tokens, one per key (same order as `keys`): the fence counter's value after this
     * acquisition (quorum mode: the value written back to a majority of the nodes' counters of
     * that key), so strictly greater than any earlier holder's of that key. `0` when fencing is
     * off. See `fence`.
     */
    readonly fences: readonly number[],
    expiresAt: number,
    /** @internal the TTL asked for; the default of `extend()` */
    readonly ttlMs: number,
    /** @internal replicas every extension waits for (`waitForReplicas` set explicitly) */
    readonly waitForReplicas?: WaitForReplicasOptions,
    /** @internal the cohort of this process that the lock belongs to (single-key locks) */
    readonly cohort?: LockCohortRef,
  ) {
    this.keys = redisKeys.map((k) => k.name);
    this.lifetime = new GrantLifetime(
      expiresAt,
      ttlMs,
      (at) => new LockLostError(this.keys, `its TTL ran out at ${new Date(at).toISOString()}`),
      () => this.owner.lockLost(this, 'expired'),
    );
  }

  /**
   * The fencing token of the first key (the only one of a single-key lock): pass it to the
   * resource you write so that it can refuse writes from an older holder. Strictly greater than
   * the fence of every earlier grant of that key; an opaque number (Redis `TIME` in µs or just
   * above it, below 2⁵³), not a count: compare it only with fences of the same lock. `0` when
   * fencing is off (`fencing: false`).
   *
   * Quorum mode (`nodes`) gives real fences too: each granting node hands out its own next fence,
   * the grant's fence is one above the highest of them (raised above any counter that refused it),
   * and the grant is reported only once a majority of the nodes accepted it into their counters of
   * the lock, so two grants of a lock never share a fence and a later one is never lower. This
   * rests on quorum mode's own assumptions (clock drift within `clockDriftFactor`; a node that
   * restarted empty kept down for the longest TTL) and, for a node that restarted empty or a
   * counter that expired (`fenceTtlMs`), on that node's clock not being behind the clock of the
   * node that handed out the previous fence by more than the time between the two grants
   * (docs/scaling.md, "Redlock: quorum mode"; docs/locks.md, "Fences").
   */
  get fence(): number {
    return this.fences[0];
  }

  /**
   * Epoch ms (this process's clock) until which the lock is surely held: computed from when the
   * request was sent, so network time is already subtracted, and less an allowance for clock
   * drift: `sentAt + ttl − (clockDriftFactor × ttl + 2 ms)` (docs/locks.md, "The holder's
   * deadline"). Moves forward on each successful extend.
   */
  get expiresAt(): number {
    return this.lifetime.expiresAt;
  }

  /**
   * Aborts when the lock is known to be lost: its TTL ran out (by the local clock) or an
   * extension found it gone. `signal.reason` is then a `LockLostError`. Releasing the lock does
   * not abort it. The TTL's timer is armed `min(20 ms, ttl / 4)` before `expiresAt`, so that a
   * busy event loop that fires it late still aborts before Redis can grant the lock to anyone
   * else.
   */
  get signal(): AbortSignal {
    return this.lifetime.signal;
  }

  /** @internal whether it was released or found lost */
  get isEnded(): boolean {
    return this.lifetime.isEnded;
  }

  /** @internal whether the lock was lost (signal aborted, or would be if read) */
  get isLost(): boolean {
    return this.lifetime.isLost;
  }

  /** @internal whether it was released (ended without being found lost) */
  get isReleased(): boolean {
    return this.lifetime.isReleased;
  }

  /** Releases the lock. Resolves `false` if it was no longer held by this token. */
  release(): Promise<boolean> {
    return this.owner.releaseLock(this);
  }

  /**
   * Sets the lock's remaining TTL to `ttlMs` (default: the TTL it was acquired with), if still
   * held. Resolves `false` (and aborts `signal`) when it is not.
   */
  extend(ttlMs: number = this.ttlMs): Promise<boolean> {
    return this.owner.extendLock(this, ttlMs);
  }

  /** Asks Redis whether this token still holds every key of the lock. */
  isHeld(): Promise<boolean> {
    return this.owner.isHeldLock(this);
  }

  /** @internal */
  setExpiresAt(expiresAt: number): void {
    this.lifetime.setExpiresAt(expiresAt);
  }

  /**
   * @internal the lock is not held any more: stops the expiry timer and, when it was lost
   * (`reason` given) rather than released, aborts `signal` with `reason` and tells the owner
   * (`why`) once
   */
  end(reason?: LockLostError, why: LockLostEvent['reason'] = 'expired'): void {
    if (this.lifetime.end(reason)) this.owner.lockLost(this, why);
  }
}
