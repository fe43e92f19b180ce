import { LockLostError } from '../errors/lock-lost.error';
import { GrantLifetime } from '../waiting/grant-lifetime';
import type { SemaphoreRedisKeys } from './semaphore-keys';

/**
 * What a `Permit` needs from the service that granted it. Its members are internal: the published
 * declarations keep an empty interface, so `SemaphoreService implements PermitOwner` type-checks.
 */
export interface PermitOwner {
  /** @internal */
  releasePermit(permit: Permit): Promise<boolean>;
  /** @internal */
  extendPermit(permit: Permit, ttlMs: number): Promise<boolean>;
  /** @internal */
  isHeldPermit(permit: Permit): Promise<boolean>;
}

/**
 * Permits of a semaphore held by this process: returned by `SemaphoreService.acquire`, passed to
 * `withPermit` callbacks. Owned by a random token; they expire by their own TTL unless extended.
 */
export class Permit {
  private readonly lifetime: GrantLifetime<LockLostError>;

  /**
   * @internal created by SemaphoreService. (The constructor is private, so the published types
   * show no way to make a Permit by hand.)
   */
  static create(
    owner: PermitOwner,
    redisKeys: SemaphoreRedisKeys,
    token: string,
    permits: number,
    fence: number,
    expiresAt: number,
    ttlMs: number,
  ): Permit {
    return new Permit(owner, redisKeys, token, permits, fence, expiresAt, ttlMs);
  }

  private constructor(
    private readonly owner: PermitOwner,
    /** @internal */ readonly redisKeys: SemaphoreRedisKeys,
    /** Random value that identifies this grant in Redis. */
    readonly token: string,
    /** How many permits this grant holds. */
    readonly permits: number,
    /**
     * Fencing token: the semaphore's grant counter after this grant, so strictly greater than
     * that of every earlier grant of the semaphore. Several holders hold permits at once, so it
     * orders grants; it does not make one holder the only writer.
     */
    readonly fence: number,
    expiresAt: number,
    /** @internal the TTL asked for; the default of `extend()` */
    readonly ttlMs: number,
  ) {
    this.lifetime = new GrantLifetime(expiresAt, ttlMs, (at) =>
      lostPermit(this, `their TTL ran out at ${new Date(at).toISOString()}`),
    );
  }

  /** The semaphore key, as given to `acquire`. */
  get key(): string {
    return this.redisKeys.name;
  }

  /** @internal `[key]`: what errors of a stream holding the permits name */
  get keys(): readonly string[] {
    return [this.redisKeys.name];
  }

  /**
   * Epoch ms until which the permits are surely held, less the allowance for clock drift of
   * locks (`sentAt + ttl − (clockDriftFactor × ttl + 2 ms)`); moves forward on each extension.
   */
  get expiresAt(): number {
    return this.lifetime.expiresAt;
  }

  /**
   * Aborts when the permits are known to be lost: their TTL ran out (by the local clock) or an
   * extension found them gone; `signal.reason` is then a `LockLostError`. Releasing does not
   * abort it. Armed `min(20 ms, ttl / 4)` before `expiresAt`, as a lock's.
   */
  get signal(): AbortSignal {
    return this.lifetime.signal;
  }

  /** Releases the permits; `false` when they were not held any more. */
  release(): Promise<boolean> {
    return this.owner.releasePermit(this);
  }

  /**
   * Sets the permits' remaining TTL to `ttlMs` (default: the TTL they were acquired with), if
   * still held. Resolves `false` (and aborts `signal`) when they are not.
   */
  extend(ttlMs: number = this.ttlMs): Promise<boolean> {
    return this.owner.extendPermit(this, ttlMs);
  }

  /** Asks Redis whether this grant still holds its permits. */
  isHeld(): Promise<boolean> {
    return this.owner.isHeldPermit(this);
  }

  /** @internal */
  setExpiresAt(expiresAt: number): void {
    this.lifetime.setExpiresAt(expiresAt);
  }

  /** @internal whether the permits were lost (signal aborted, or would be if read) */
  get isLost(): boolean {
    return this.lifetime.isLost;
  }

  /** @internal not held any more; when lost (`reason`), aborts `signal` */
  end(reason?: LockLostError): void {
    this.lifetime.end(reason);
  }
}

/** @internal The error of a permit that is gone. */
export function lostPermit(permit: Permit, detail: string): LockLostError {
  return new LockLostError([permit.key], `semaphore permits: ${detail}`);
}
