import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { BeforeApplicationShutdown, Injectable, Logger } from '@nestjs/common';
import { LockLostError } from '../errors/lock-lost.error';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { LockQuorumError } from '../errors/lock-quorum.error';
import { LockReplicationError } from '../errors/lock-replication.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import type {
  LockOptions,
  WaitForReplicasOptions,
  WithLockOptions,
} from '../interfaces/lock-options.interface';
import { resolveLockOptions, type ResolvedLockOptions } from '../options/resolve-options';
import { RedisLockConnection } from '../redis/redis-connection';
import { Lock, type LockOwner } from './lock';
import { checkLockNames, lockRedisKeys, type LockRedisKeys } from './lock-keys';
import type { LockAttempt, LockStore } from './lock-store';
import { QuorumLockStore } from './quorum-lock-store';
import { SingleNodeLockStore } from './single-node-lock-store';
import { WakeSignal } from './wake-signal';

/** A fresh acquisition token: 122 random bits as 32 hex digits (randomUUID draws on a cached pool). */
const newToken = () => randomUUID().replace(/-/g, '');

/**
 * Distributed locks on Redis: token-owned, atomic (one Lua script per operation), fair by default
 * (FIFO line with direct handoff, woken by pub/sub), fenced, and extended automatically while a
 * `withLock` callback runs. With the module's `nodes` option, locks use quorum mode (Redlock) on
 * independent masters instead: same API, not fair, no fences.
 */
@Injectable()
export class LockService implements LockOwner, BeforeApplicationShutdown {
  private readonly logger = new Logger('LockService');
  private readonly held = new Map<string, Lock>();
  private readonly context = new AsyncLocalStorage<ReadonlyMap<string, Lock>>();
  private readonly defaults: ResolvedLockOptions;
  private readonly store: LockStore;

  constructor(private readonly connection: RedisLockConnection) {
    this.defaults = connection.options.lock;
    this.store =
      connection.nodes.length > 0
        ? new QuorumLockStore(connection.nodes, connection.options.clockDriftFactor)
        : new SingleNodeLockStore(connection);
  }

  /**
   * Acquires the lock on `key` (or on every key of an array, all or nothing), waiting up to
   * `waitMs` (default: the module's, `0` = try once).
   * @throws LockTimeoutError when it could not be had in time
   * @throws LockQuorumError in quorum mode, when fewer nodes than a majority answered
   * @throws LockReplicationError when `waitForReplicas` was not satisfied (the lock is released)
   * @example
   * const lock = await locks.acquire(`stock:${sku}`, { waitMs: 2000, ttlMs: 5000 });
   * try { ... } finally { await lock.release(); }
   */
  async acquire(key: string | string[], options?: LockOptions): Promise<Lock> {
    const { o, keys } = this.resolve(key, options);
    const result = await this.obtain(keys, o);
    if (result instanceof LockTimeoutError) throw result;
    return result;
  }

  /**
   * Like `acquire`, but resolves `null` instead of throwing when the lock could not be had within
   * `waitMs` (default `0`: one try).
   */
  async tryAcquire(key: string | string[], options?: LockOptions): Promise<Lock | null> {
    const { o, keys } = this.resolve(key, options);
    const result = await this.obtain(keys, o);
    return result instanceof LockTimeoutError ? null : result;
  }

  /**
   * Runs `fn` while holding the lock and always releases it afterwards. While `fn` runs the lock
   * is extended every `ttlMs / 3` (`autoExtend`, default on); if it is lost, `lock.signal`
   * aborts with a `LockLostError`. `fn`'s own error is never replaced by a release error.
   * A call nested in another `withLock`/`@WithLock` on the same keys (same async call chain)
   * joins the held lock instead of waiting for itself. With `skipIfLocked`, a lock that cannot be
   * had in time skips `fn` and resolves `undefined` (logged at debug level) instead of throwing.
   * @example
   * await locks.withLock(`order:${id}`, async (lock) => settle(id, { signal: lock.signal }), { waitMs: 1000 });
   */
  withLock<T>(
    key: string | string[],
    fn: (lock: Lock) => T | Promise<T>,
    options?: WithLockOptions & { skipIfLocked?: false },
  ): Promise<T>;
  withLock<T>(
    key: string | string[],
    fn: (lock: Lock) => T | Promise<T>,
    options?: WithLockOptions,
  ): Promise<T | undefined>;
  async withLock<T>(
    key: string | string[],
    fn: (lock: Lock) => T | Promise<T>,
    options?: WithLockOptions,
  ): Promise<T | undefined> {
    // Checked before the lock is taken: calling a non-function after acquiring wrote to Redis
    // (SET + INCR fence) and rejected with a plain TypeError.
    if (typeof fn !== 'function') throw new RedisLockOptionsError('fn', fn, 'a function');
    const { o, keys } = this.resolve(key, options);
    const current = this.context.getStore();
    const joined = current && keys.every((k) => current.has(k.value)) && current.get(keys[0].value);
    if (joined) return fn(joined);

    const lock = await this.obtain(keys, o);
    if (lock instanceof LockTimeoutError) {
      if (!o.skipIfLocked) throw lock;
      this.logger.debug(`skipped (skipIfLocked): ${lock.message}`);
      return undefined;
    }
    const stopExtending = o.autoExtend ? this.keepExtended(lock) : undefined;
    const store = new Map(current);
    for (const k of keys) store.set(k.value, lock);
    let failed = false;
    try {
      return await this.context.run(store, () => fn(lock));
    } catch (err) {
      failed = true;
      throw err;
    } finally {
      stopExtending?.();
      try {
        await this.releaseLock(lock);
      } catch (err) {
        // The lock expires by its TTL anyway; fn's outcome is what the caller needs to see.
        this.logger.warn(
          `release of ${lock.keys.join(', ')} failed${failed ? ' after the callback failed' : ''}: ${(err as Error).message}`,
        );
      }
    }
  }

  /**
   * The lock of the innermost `withLock`/`@WithLock` running in this async call chain (the one
   * holding `key`, when given), so deep code can read `signal` or `fence`.
   */
  currentLock(key?: string): Lock | undefined {
    const store = this.context.getStore();
    if (!store) return undefined;
    if (key === undefined) return [...store.values()].pop();
    for (const lock of store.values()) if (lock.keys.includes(key)) return lock;
    return undefined;
  }

  /**
   * Releases a lock (a `Lock`, or the lock this instance holds on `key`). Resolves `false` when it
   * was not held (any more).
   */
  async release(lockOrKey: Lock | string): Promise<boolean> {
    const lock = this.find(lockOrKey);
    return lock ? this.releaseLock(lock) : false;
  }

  /** Sets the remaining TTL of a lock this instance holds; `false` when it is not held any more. */
  async extend(lockOrKey: Lock | string, ttlMs: number): Promise<boolean> {
    // Validated whether or not the lock is held, so that a bad TTL never passes silently.
    resolveLockOptions(this.defaults, { ttlMs });
    const lock = this.find(lockOrKey);
    return lock ? this.extendLock(lock, ttlMs) : false;
  }

  /** Whether this instance holds the lock (checked in Redis). */
  async isHeld(lockOrKey: Lock | string): Promise<boolean> {
    const lock = this.find(lockOrKey);
    return lock ? this.isHeldLock(lock) : false;
  }

  /** Whether anyone holds the lock on `key` (checked in Redis; by a majority in quorum mode). */
  async isLocked(key: string, options?: Pick<LockOptions, 'keyPrefix'>): Promise<boolean> {
    const o = resolveLockOptions(this.defaults, options);
    return this.store.isLocked(lockRedisKeys(o.keyPrefix, checkLockNames(key)[0]));
  }

  /** Releases every lock this instance holds; resolves how many were still held. */
  async releaseAll(): Promise<number> {
    const results = await Promise.allSettled(
      [...this.held.values()].map((l) => this.releaseLock(l)),
    );
    return results.filter((r) => r.status === 'fulfilled' && r.value).length;
  }

  /** @internal Releases what this instance holds when the application shuts down. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.releaseAll();
  }

  /** @internal */
  async releaseLock(lock: Lock): Promise<boolean> {
    this.held.delete(lock.token);
    lock.end();
    return this.store.release(lock.redisKeys, lock.token);
  }

  /**
   * @internal
   * @throws LockReplicationError when the lock's `waitForReplicas` was not satisfied (the lock
   *   stays held and extended on the master)
   */
  async extendLock(lock: Lock, ttlMs: number): Promise<boolean> {
    const ttl = resolveLockOptions(this.defaults, { ttlMs }).ttlMs;
    const w = lock.waitForReplicas;
    const extension = await this.store.extend(lock.redisKeys, lock.token, ttl, w);
    if (extension.held) {
      if (w && extension.acknowledged! < w.replicas) {
        // Held on the master, but not durably: `expiresAt` stays at the last acknowledged
        // extension, so auto-extension aborts the signal if none is acknowledged before it.
        throw new LockReplicationError(
          lock.keys,
          'extend',
          extension.acknowledged!,
          w.replicas,
          w.timeoutMs,
        );
      }
      lock.setExpiresAt(extension.expiresAt);
      return true;
    }
    this.held.delete(lock.token);
    lock.end(new LockLostError(lock.keys, 'it expired or another owner holds it now'));
    return false;
  }

  /** @internal */
  async isHeldLock(lock: Lock): Promise<boolean> {
    return this.store.isHeld(lock.redisKeys, lock.token);
  }

  private find(lockOrKey: Lock | string): Lock | undefined {
    if (lockOrKey instanceof Lock) return lockOrKey;
    const name = checkLockNames(lockOrKey)[0];
    for (const lock of this.held.values()) if (lock.keys.includes(name)) return lock;
    return undefined;
  }

  /** Validates the keys and options of a call (typed errors) and applies the defaults. */
  private resolve(
    key: string | string[],
    options: LockOptions | WithLockOptions | undefined,
  ): { o: ResolvedLockOptions; keys: LockRedisKeys[] } {
    const o = resolveLockOptions(this.defaults, options);
    const keys = checkLockNames(key).map((name) => lockRedisKeys(o.keyPrefix, name));
    this.store.check(keys, o);
    return { o, keys };
  }

  /** Acquires, or returns the timeout error (not thrown, so tryAcquire needs no try/catch). */
  private async obtain(
    keys: LockRedisKeys[],
    o: ResolvedLockOptions,
  ): Promise<Lock | LockTimeoutError> {
    o.signal?.throwIfAborted();
    const token = newToken();
    const started = Date.now();
    const first = await this.store.attempt(keys, token, o, false);
    const result = first.granted
      ? this.grant(keys, token, o, first.fences, first.expiresAt)
      : o.waitMs === 0
        ? this.gaveUp(keys, first, 0)
        : await this.wait(keys, token, o, started);
    if (result instanceof Lock && o.waitForReplicas) {
      await this.confirmReplicated(result, o.waitForReplicas);
    }
    return result;
  }

  /**
   * `waitForReplicas`: extends the new lock to its full TTL with `WAIT` right behind it (the
   * extension is a write of this connection, whichever way the lock was granted). When too few
   * replicas acknowledge, the lock is released and the acquisition fails.
   */
  private async confirmReplicated(lock: Lock, w: WaitForReplicasOptions): Promise<void> {
    let failure: unknown;
    try {
      if (await this.extendLock(lock, lock.ttlMs)) return;
      failure = new LockLostError(lock.keys, 'it expired before its replication was confirmed');
    } catch (err) {
      failure =
        err instanceof LockReplicationError
          ? new LockReplicationError(
              lock.keys,
              'acquire',
              err.acknowledged,
              w.replicas,
              w.timeoutMs,
            )
          : err;
    }
    await this.releaseLock(lock).catch(() => undefined);
    throw failure;
  }

  /** The wait is over without the lock: contention (returned) or too few nodes (thrown). */
  private gaveUp(keys: LockRedisKeys[], last: LockAttempt, waited: number): LockTimeoutError {
    const names = keys.map((k) => k.name);
    const short = last.shortOf;
    if (short) {
      throw new LockQuorumError(
        names,
        'acquire',
        short.nodes,
        short.answered,
        short.granted,
        short.needed,
        waited,
      );
    }
    return new LockTimeoutError(names, waited, holderMs(last));
  }

  /**
   * Sleeps until woken by a release message (or the poll timer), then tries again, until the lock
   * is ours or `waitMs` is over. A fair single-key waiter stands in the line in Redis, renews its
   * entry on every attempt, and is usually handed the lock by the release itself.
   */
  private async wait(
    keys: LockRedisKeys[],
    token: string,
    o: ResolvedLockOptions,
    started: number,
  ): Promise<Lock | LockTimeoutError> {
    const inLine = this.store.lines && o.fair && keys.length === 1;
    const deadline = started + o.waitMs;
    const wake = new WakeSignal(token);
    const unlisten: Array<() => void> = [];
    let last: LockAttempt | undefined;
    try {
      for (const k of keys) {
        try {
          unlisten.push(await this.store.listen(k.channel, wake.push));
        } catch {
          // No subscription: the poll timer alone paces this waiter (at most one interval late).
        }
      }
      for (;;) {
        wake.clear();
        // Outside the line every attempt has a fresh token: one that failed (or timed out and
        // may still run somewhere) is never confused with the one that succeeds.
        const attemptToken = inLine ? token : newToken();
        last = await this.store.attempt(keys, attemptToken, o, inLine);
        if (last.granted) return this.grant(keys, attemptToken, o, last.fences, last.expiresAt);
        const left = deadline - Date.now();
        if (left <= 0) break;
        const poll = o.retryIntervalMs * (0.5 + Math.random() / 2);
        const message = await wake.wait(
          Math.min(left, poll, last.wait > 0 ? last.wait + 1 : Infinity),
          o.signal,
        );
        if (message?.startsWith('h ')) {
          // Handed to us by release.lua. It ran at Redis time `grantedAt`, after our last attempt
          // (at `last.redisNow`, sent at `last.sentAt`): so it expires no sooner than this.
          const [, , fence, grantedAt, ttl] = message.split(' ');
          const expiresAt = last.sentAt + (Number(grantedAt) - last.redisNow) + Number(ttl);
          return this.grant(keys, token, o, [Number(fence)], expiresAt);
        }
      }
      if (inLine) {
        const left = await this.store.leaveLine(keys[0], token);
        if (left.granted) return this.grant(keys, token, o, left.fences, left.sentAt + o.ttlMs);
      }
      return this.gaveUp(keys, last, Date.now() - started);
    } catch (err) {
      if (inLine) await this.abandon(keys, token);
      throw err;
    } finally {
      for (const stop of unlisten) stop();
    }
  }

  /** After an error or abort while in line: leave it, and release the lock if it was handed to us. */
  private async abandon(keys: LockRedisKeys[], token: string): Promise<void> {
    try {
      const left = await this.store.leaveLine(keys[0], token);
      if (left.granted) await this.store.release(keys, token);
    } catch {
      // Redis is unreachable: the entry lapses by its deadline, a handed lock by its TTL.
    }
  }

  private grant(
    keys: LockRedisKeys[],
    token: string,
    o: ResolvedLockOptions,
    fences: number[],
    expiresAt: number,
  ): Lock {
    const lock = new Lock(
      this,
      keys,
      token,
      o.fencing ? fences : fences.map(() => 0),
      expiresAt,
      o.ttlMs,
      o.waitForReplicas,
    );
    this.held.set(token, lock);
    return lock;
  }

  /**
   * Extends the lock whenever a third of its TTL has passed, until the returned function is
   * called. Never throws: a lost lock aborts `lock.signal`; a failed extension is retried until
   * the lock would have expired, and then aborts it too.
   */
  private keepExtended(lock: Lock): () => void {
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    const schedule = (ms: number) => {
      if (stopped || lock.signal.aborted) return;
      timer = setTimeout(tick, Math.max(0, ms));
      timer.unref();
    };
    const tick = async () => {
      try {
        if (await this.extendLock(lock, lock.ttlMs)) {
          schedule(lock.expiresAt - Date.now() - (2 * lock.ttlMs) / 3);
        }
      } catch (err) {
        const left = lock.expiresAt - Date.now();
        if (left > 0) schedule(Math.min(left / 2, lock.ttlMs / 10));
        else
          lock.end(
            new LockLostError(lock.keys, `it could not be extended: ${(err as Error).message}`),
          );
      }
    };
    schedule(lock.expiresAt - Date.now() - (2 * lock.ttlMs) / 3);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }
}

function holderMs(attempt: LockAttempt): number | undefined {
  return attempt.wait >= 0 ? attempt.wait : undefined;
}
