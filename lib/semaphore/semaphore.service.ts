import { randomUUID } from 'node:crypto';
import { BeforeApplicationShutdown, Injectable } from '@nestjs/common';
import { RedactingLogger } from '../redaction/redacting-logger';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { SemaphoreLimitError } from '../errors/semaphore-limit.error';
import { SemaphoreTimeoutError } from '../errors/semaphore-timeout.error';
import { LINE_RENEW_MS } from '../lock/lock-store';
import { RedisLockConnection } from '../redis/redis-connection';
import { keepExtended } from '../waiting/keep-extended';
import { LineRenewal } from '../waiting/line-renewal';
import { lostPermit, Permit, type PermitOwner } from './permit';
import { SemaphoreLine, type PermitOutcome, type SemaphoreLineHost } from './semaphore-line';
import { semaphoreRedisKeys, type SemaphoreRedisKeys } from './semaphore-keys';
import {
  resolveSemaphoreOptions,
  type ResolvedSemaphoreOptions,
  type SemaphoreOptions,
  type WithPermitOptions,
} from './semaphore-options';
import { SemaphoreStore, type PermitEntry, type PermitEntryStatus } from './semaphore-store';

const newToken = () => randomUUID().replace(/-/g, '');
const shuttingDown = () =>
  new RedisUnavailableError('semaphore acquire', 'the module is shutting down');

/**
 * Distributed counting semaphores on Redis ("at most 5 calls to the payment provider at once
 * across all instances"): each grant is token-owned and expires by its own TTL (a crashed
 * holder's permits come back), waiters are served first come, first served with direct handoff
 * on release (as many as fit) and woken by pub/sub, and `withPermit` extends the permits while
 * its callback runs. The limit is stored with the semaphore while it is in use. Not available in
 * quorum mode (`nodes`): every call then fails with `RedisLockOptionsError` (option `nodes`).
 * @example
 * await semaphores.withPermit('payment-provider', () => charge(order), { limit: 5, waitMs: 2000 });
 */
@Injectable()
export class SemaphoreService implements PermitOwner, BeforeApplicationShutdown {
  private readonly logger = new RedactingLogger('SemaphoreService');
  private readonly store: SemaphoreStore;
  private readonly renewal: LineRenewal<PermitEntry, PermitEntryStatus>;
  private readonly lines = new Map<string, SemaphoreLine>();
  /** Every grant this instance holds (as far as it knows). */
  private readonly held = new Set<Permit>();
  private readonly host: SemaphoreLineHost;
  /** The module is shutting down: no new acquisition starts. */
  private closing = false;

  constructor(private readonly connection: RedisLockConnection) {
    this.store = new SemaphoreStore(connection);
    this.renewal = new LineRenewal(
      (entries) => this.store.renew(entries),
      LINE_RENEW_MS,
      (err) => this.warn('renewing places in semaphore lines failed', err),
    );
    this.host = {
      store: this.store,
      renewal: this.renewal,
      grant: (key, token, o, fence, expiresAt) => this.grant(key, token, o, fence, expiresAt),
      dispose: (line) => {
        if (this.lines.get(line.key.holders) === line) this.lines.delete(line.key.holders);
      },
      warn: (what, err) => this.warn(what, err),
    };
  }

  /**
   * Acquires `permits` (default 1) of the `limit` permits of semaphore `key`, waiting up to
   * `waitMs` (default: the module's, `0` = try once) in a FIFO line.
   * @throws SemaphoreTimeoutError (a `LockTimeoutError`) when they could not be had in time
   * @throws SemaphoreLimitError when the semaphore is in use with another limit
   * @throws RedisLockOptionsError for a bad option (e.g. `limit: 0`, `permits` above `limit`),
   *   and with option `nodes` in quorum mode, which has no semaphores
   * @example
   * const permit = await semaphores.acquire('provider:acme', { limit: 5, waitMs: 1000 });
   * try { ... } finally { await permit.release(); }
   */
  async acquire(key: string, options: SemaphoreOptions): Promise<Permit> {
    const result = await this.obtain(key, options);
    if (result instanceof SemaphoreTimeoutError) throw result;
    return result;
  }

  /** Like `acquire`, but resolves `null` instead of throwing when the permits could not be had. */
  async tryAcquire(key: string, options: SemaphoreOptions): Promise<Permit | null> {
    const result = await this.obtain(key, options);
    return result instanceof SemaphoreTimeoutError ? null : result;
  }

  /**
   * Runs `fn` while holding permits and always releases them afterwards. While `fn` runs they
   * are extended every `ttlMs / 3` (`autoExtend`, default on); if they are lost, `permit.signal`
   * aborts with a `LockLostError`. `fn`'s own error is never replaced by a release error.
   * @example
   * await semaphores.withPermit('provider:acme', (p) => call({ signal: p.signal }), { limit: 5, waitMs: 2000 });
   */
  async withPermit<T>(
    key: string,
    fn: (permit: Permit) => T | Promise<T>,
    options: WithPermitOptions,
  ): Promise<T> {
    if (typeof fn !== 'function') throw new RedisLockOptionsError('fn', fn, 'a function');
    const o = resolveSemaphoreOptions(this.connection.options.lock, options);
    const permit = await this.acquire(key, options);
    const stop = o.autoExtend
      ? keepExtended(
          permit,
          (ms) => this.extendPermit(permit, ms),
          (detail) => {
            permit.end(lostPermit(permit, `they ${detail}`));
          },
        )
      : undefined;
    let failed = false;
    try {
      return await fn(permit);
    } catch (err) {
      failed = true;
      throw err;
    } finally {
      stop?.();
      try {
        // Not when the module's shutdown released it already (on a connection now closed).
        if (this.held.has(permit) || !this.closing) await this.releasePermit(permit);
      } catch (err) {
        // The permits expire by their TTL anyway; fn's outcome is what the caller needs to see.
        this.logger.warn(
          `release of semaphore ${permit.key} failed${failed ? ' after the callback failed' : ''}: ${(err as Error).message}`,
        );
      }
    }
  }

  /** Releases every grant this instance holds; resolves how many were still held. */
  async releaseAll(): Promise<number> {
    const results = await Promise.allSettled([...this.held].map((p) => this.releasePermit(p)));
    return results.filter((r) => r.status === 'fulfilled' && r.value).length;
  }

  /** @internal What must end before the shutdown starts (see `LockService.shutdownAfter`). */
  shutdownAfter?: () => Promise<unknown>;

  /**
   * Nest lifecycle hook: refuses new acquisitions, tells waiting callers (`RedisUnavailableError`),
   * leaves every line (giving back permits handed meanwhile), then releases what this instance
   * holds (aborting the `signal` of each first), so that no permit is handed to an instance that
   * is going away.
   */
  async beforeApplicationShutdown(): Promise<void> {
    // As LockService's: the queue workers drain first, and their handlers may take permits.
    await this.shutdownAfter?.().catch(() => undefined);
    this.closing = true;
    this.renewal.close();
    const lines = [...this.lines.values()];
    this.lines.clear();
    await Promise.allSettled(lines.map((line) => line.close(shuttingDown())));
    // A holder still running (a withPermit callback) learns by its signal that its permits are
    // gone before the release hands them to anyone else.
    for (const permit of this.held) {
      permit.end(lostPermit(permit, 'the module shut down and released them'));
    }
    await this.releaseAll();
  }

  /** @internal callers of this instance waiting for semaphore `key` (tests, inspection) */
  localWaiters(key: string, keyPrefix = this.connection.options.lock.keyPrefix): number {
    return this.lines.get(semaphoreRedisKeys(keyPrefix, key).holders)?.waiting ?? 0;
  }

  /** @internal */
  async releasePermit(permit: Permit): Promise<boolean> {
    this.held.delete(permit);
    // Released after their TTL ran out (a callback that outlived it): they were lost before.
    permit.end(
      permit.isLost ? lostPermit(permit, 'their TTL ran out before the release') : undefined,
    );
    return this.store.release(permit.redisKeys, permit.token);
  }

  /** @internal */
  async extendPermit(permit: Permit, ttlMs: number): Promise<boolean> {
    const o = resolveSemaphoreOptions(this.connection.options.lock, { limit: 1, ttlMs });
    const sentAt = Date.now();
    if (await this.store.extend(permit.redisKeys, permit.token, o.ttlMs)) {
      permit.setExpiresAt(this.store.deadline(sentAt, o.ttlMs));
      return true;
    }
    this.held.delete(permit);
    permit.end(lostPermit(permit, 'they expired'));
    return false;
  }

  /** @internal */
  isHeldPermit(permit: Permit): Promise<boolean> {
    return this.store.isHeld(permit.redisKeys, permit.token);
  }

  private async obtain(key: string, options: SemaphoreOptions): Promise<PermitOutcome> {
    if (this.connection.nodes.length > 0) {
      // A Redlock semaphore would need a quorum of every grant and of the line: not implemented.
      throw new RedisLockOptionsError(
        'nodes',
        '(quorum mode)',
        'no nodes for semaphores (they run on one Redis, Sentinel or Cluster)',
      );
    }
    const o = resolveSemaphoreOptions(this.connection.options.lock, options);
    const k = semaphoreRedisKeys(o.keyPrefix, key);
    o.signal?.throwIfAborted();
    if (this.closing) throw shuttingDown();
    const started = Date.now();
    const token = newToken();
    const first = await this.store.acquire(k, token, o, o.waitMs > 0, true);
    // Shut down during the first attempt: what it was granted, or its place in line, goes back.
    if (this.closing) {
      try {
        if (first.granted) await this.store.release(k, token);
        else if (o.waitMs > 0) await this.store.leaveLine(k, token);
      } catch (err) {
        // Unreachable: the permits lapse by their TTL, the place in line by its deadline.
        this.warn(`semaphore ${key}: giving back at shutdown failed`, err);
      }
      throw shuttingDown();
    }
    if (first.granted) return this.grant(k, token, o, first.fence, first.expiresAt);
    if ('storedLimit' in first) throw new SemaphoreLimitError(key, o.limit, first.storedLimit);
    if (o.waitMs === 0) {
      return new SemaphoreTimeoutError(
        key,
        o.permits,
        o.limit,
        0,
        first.soonestMs >= 0 ? first.soonestMs : undefined,
      );
    }
    let line = this.lines.get(k.holders);
    if (!line) {
      line = new SemaphoreLine(this.host, k);
      this.lines.set(k.holders, line);
    }
    return line.wait(token, o, started, first);
  }

  private grant(
    k: SemaphoreRedisKeys,
    token: string,
    o: ResolvedSemaphoreOptions,
    fence: number,
    expiresAt: number,
  ): Permit {
    const permit = Permit.create(this, k, token, o.permits, fence, expiresAt, o.ttlMs);
    this.held.add(permit);
    // Code that lets permits run out (a TTL used as a throttle) must not make `held` grow.
    if (this.held.size % 256 === 0) {
      for (const p of this.held) if (p.expiresAt <= Date.now()) this.held.delete(p);
    }
    return permit;
  }

  private warn(what: string, err: unknown): void {
    this.logger.warn(`${what}: ${err instanceof Error ? err.message : String(err)}`);
  }
}
