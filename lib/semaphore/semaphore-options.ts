import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import type { ResolvedLockOptions } from '../options/resolve-options';
import { checkBoolean, checkInt, checkKnownKeys, checkPrefix } from '../options/validate';

/** Largest `limit` of a semaphore (every script walks at most this many holders when pruning). */
export const MAX_SEMAPHORE_LIMIT = 100_000;

/** Upper bound of a permit TTL and a wait: one day (as for locks). */
const MAX_MS = 86_400_000;

/** Options of one semaphore acquisition; unset fields fall back to the module's lock defaults. */
export interface SemaphoreOptions {
  /**
   * How many permits the semaphore has. Stored with the semaphore while it is in use (a permit
   * held or a caller waiting); a call giving another limit then fails with `SemaphoreLimitError`.
   * An idle semaphore leaves nothing in Redis, so the next call sets the limit anew.
   */
  limit: number;
  /**
   * Permits this call takes (all or nothing).
   * @default 1
   */
  permits?: number;
  /**
   * How long the permits live unless extended or released, in ms: a crashed holder's permits
   * come back after it.
   * @default the module's `ttlMs` (30000)
   */
  ttlMs?: number;
  /**
   * How long to wait for the permits, in ms, in a FIFO line. `0` tries once. A caller that
   * times out has waited at least `waitMs` (`SemaphoreTimeoutError.waitedMs`).
   * @default the module's `waitMs` (0)
   */
  waitMs?: number;
  /** Prefix of the semaphore's Redis keys (overrides the module's `keyPrefix`). */
  keyPrefix?: string;
  /** Aborting this signal stops waiting: the call rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** Options of `SemaphoreService.withPermit`. */
export interface WithPermitOptions extends SemaphoreOptions {
  /**
   * Extend the permits every `ttlMs / 3` while the callback runs; when an extension finds them
   * gone, `permit.signal` aborts with a `LockLostError`.
   * @default true
   */
  autoExtend?: boolean;
}

/** Semaphore options with every default applied. */
export interface ResolvedSemaphoreOptions {
  limit: number;
  permits: number;
  ttlMs: number;
  waitMs: number;
  keyPrefix: string;
  autoExtend: boolean;
  signal?: AbortSignal;
}

const SEMAPHORE_KEYS = [
  'limit',
  'permits',
  'ttlMs',
  'waitMs',
  'keyPrefix',
  'signal',
  'autoExtend',
] as const;

/**
 * Validates per-call semaphore options (typed errors naming the option and value) and fills
 * unset ones from the module's lock defaults.
 */
export function resolveSemaphoreOptions(
  defaults: ResolvedLockOptions,
  options: WithPermitOptions | undefined,
): ResolvedSemaphoreOptions {
  const o = checkKnownKeys('', options, SEMAPHORE_KEYS) as Partial<WithPermitOptions>;
  const limit = checkInt('limit', o.limit, 1, MAX_SEMAPHORE_LIMIT);
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) {
    throw new RedisLockOptionsError('signal', o.signal, 'an AbortSignal');
  }
  return {
    limit,
    permits: o.permits === undefined ? 1 : checkInt('permits', o.permits, 1, limit),
    ttlMs: o.ttlMs === undefined ? defaults.ttlMs : checkInt('ttlMs', o.ttlMs, 1, MAX_MS),
    waitMs: o.waitMs === undefined ? defaults.waitMs : checkInt('waitMs', o.waitMs, 0, MAX_MS),
    keyPrefix:
      o.keyPrefix === undefined ? defaults.keyPrefix : checkPrefix('keyPrefix', o.keyPrefix),
    autoExtend:
      o.autoExtend === undefined ? defaults.autoExtend : checkBoolean('autoExtend', o.autoExtend),
    signal: o.signal,
  };
}
