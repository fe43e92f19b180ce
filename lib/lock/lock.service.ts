import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { BeforeApplicationShutdown, Injectable, Logger } from '@nestjs/common';
import { LockLostError } from '../errors/lock-lost.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import type { LockOptions, WithLockOptions } from '../interfaces/lock-options.interface';
import { resolveLockOptions, type ResolvedLockOptions } from '../options/resolve-options';
import { RedisLockConnection } from '../redis/redis-connection';
import { Lock, type LockOwner } from './lock';
import { checkLockNames, lockRedisKeys, type LockRedisKeys } from './lock-keys';
import { LOCK_SCRIPTS } from './lock-scripts';
import { WakeSignal } from './wake-signal';

/** One answer of acquire.lua / leave-line.lua, with when the request was sent. */
interface Attempt {
  granted: boolean;
  fences: number[];
  /** Redis clock (ms) when the script ran. */
  redisNow: number;
  /** Local clock (ms) when the request was sent. */
  sentAt: number;
  /** Holder's PTTL; -1 holder without TTL; -2 free but others first in line. */
  wait: number;
}

/**
 * Distributed locks on Redis: token-owned, atomic (one Lua script per operation), fair by default
 * (FIFO line with direct handoff, woken by pub/sub), fenced, and extended automatically while a
 * `withLock` callback runs.
 */
@Injectable()
export class LockService implements LockOwner, BeforeApplicationShutdown {
  private readonly logger = new Logger('LockService');
  private readonly held = new Map<string, Lock>();
  private readonly context = new AsyncLocalStorage<ReadonlyMap<string, Lock>>();
  private readonly defaults: ResolvedLockOptions;

  constructor(private readonly connection: RedisLockConnection) {
    this.defaults = connection.options.lock;
  }

  /**
   * Acquires the lock on `key` (or on every key of an array, all or nothing), waiting up to
   * `waitMs` (default: the module's, `0` = try once).
   * @throws LockTimeoutError when it could not be had in time
   * @example
   * const lock = await locks.acquire(`stock:${sku}`, { waitMs: 2000, ttlMs: 5000 });
   * try { ... } finally { await lock.release(); }
   */
  async acquire(key: string | string[], options?: LockOptions): Promise<Lock> {
    const result = await this.obtain(key, options);
    if (result instanceof LockTimeoutError) throw result;
    return result;
  }

  /**
   * Like `acquire`, but resolves `null` instead of throwing when the lock could not be had within
   * `waitMs` (default `0`: one try).
   */
  async tryAcquire(key: string | string[], options?: LockOptions): Promise<Lock | null> {
    const result = await this.obtain(key, options);
    return result instanceof LockTimeoutError ? null : result;
  }

  /**
   * Runs `fn` while holding the lock and always releases it afterwards. While `fn` runs the lock
   * is extended every `ttlMs / 3` (`autoExtend`, default on); if it is lost, `lock.signal`
   * aborts with a `LockLostError`. `fn`'s own error is never replaced by a release error.
   * A call nested in another `withLock`/`@WithLock` on the same keys (same async call chain)
   * joins the held lock instead of waiting for itself.
   * @example
   * await locks.withLock(`order:${id}`, async (lock) => settle(id, { signal: lock.signal }), { waitMs: 1000 });
   */
  async withLock<T>(
    key: string | string[],
    fn: (lock: Lock) => T | Promise<T>,
    options?: WithLockOptions,
  ): Promise<T> {
    const o = resolveLockOptions(this.defaults, options);
    const keys = checkLockNames(key).map((name) => lockRedisKeys(o.keyPrefix, name));
    const current = this.context.getStore();
    const joined = current && keys.every((k) => current.has(k.value)) && current.get(keys[0].value);
    if (joined) return fn(joined);

    const lock = await this.acquire(key, options);
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
    const lock = this.find(lockOrKey);
    return lock ? this.extendLock(lock, ttlMs) : false;
  }

  /** Whether this instance holds the lock (checked in Redis). */
  async isHeld(lockOrKey: Lock | string): Promise<boolean> {
    const lock = this.find(lockOrKey);
    return lock ? this.isHeldLock(lock) : false;
  }

  /** Whether anyone holds the lock on `key` (checked in Redis). */
  async isLocked(key: string, options?: Pick<LockOptions, 'keyPrefix'>): Promise<boolean> {
    const o = resolveLockOptions(this.defaults, options);
    const { value } = lockRedisKeys(o.keyPrefix, checkLockNames(key)[0]);
    return (await this.connection.call('lock EXISTS', (c) => c.exists(value))) === 1;
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
    const released = await this.connection.run(LOCK_SCRIPTS.release, releaseKeys(lock.redisKeys), [
      lock.token,
      this.connection.isCluster ? 1 : 0,
    ]);
    return released === lock.redisKeys.length;
  }

  /** @internal */
  async extendLock(lock: Lock, ttlMs: number): Promise<boolean> {
    const ttl = resolveLockOptions(this.defaults, { ttlMs }).ttlMs;
    const sentAt = Date.now();
    const ok = await this.connection.run(
      LOCK_SCRIPTS.extend,
      lock.redisKeys.map((k) => k.value),
      [lock.token, ttl],
    );
    if (ok === 1) {
      lock.setExpiresAt(sentAt + ttl);
      return true;
    }
    this.held.delete(lock.token);
    lock.end(new LockLostError(lock.keys, 'it expired or another owner holds it now'));
    return false;
  }

  /** @internal */
  async isHeldLock(lock: Lock): Promise<boolean> {
    const values = await this.connection.call('lock MGET', (c) =>
      c.mget(...lock.redisKeys.map((k) => k.value)),
    );
    return values.every((v) => v === lock.token);
  }

  private find(lockOrKey: Lock | string): Lock | undefined {
    if (lockOrKey instanceof Lock) return lockOrKey;
    const name = checkLockNames(lockOrKey)[0];
    for (const lock of this.held.values()) if (lock.keys.includes(name)) return lock;
    return undefined;
  }

  /** Acquires, or returns the timeout error (not thrown, so tryAcquire needs no try/catch). */
  private async obtain(
    key: string | string[],
    options?: LockOptions,
  ): Promise<Lock | LockTimeoutError> {
    const o = resolveLockOptions(this.defaults, options);
    const names = checkLockNames(key);
    const keys = names.map((name) => lockRedisKeys(o.keyPrefix, name));
    o.signal?.throwIfAborted();
    const token = randomBytes(16).toString('hex');
    const started = Date.now();
    const first = await this.attempt(keys, token, o, false);
    if (first.granted) return this.grant(keys, token, o, first.fences, first.sentAt + o.ttlMs);
    if (o.waitMs === 0) return new LockTimeoutError(names, 0, holderMs(first));
    return this.wait(keys, token, o, started);
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
    const inLine = o.fair && keys.length === 1;
    const deadline = started + o.waitMs;
    const wake = new WakeSignal(token);
    const unlisten: Array<() => void> = [];
    let last: Attempt | undefined;
    try {
      for (const k of keys) {
        try {
          unlisten.push(await this.connection.hub.listen(k.channel, wake.push));
        } catch {
          // No subscription: the poll timer alone paces this waiter (at most one interval late).
        }
      }
      for (;;) {
        wake.clear();
        last = await this.attempt(keys, token, o, inLine);
        if (last.granted) return this.grant(keys, token, o, last.fences, last.sentAt + o.ttlMs);
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
        const left = await this.leaveLine(keys[0], token);
        if (left.granted) return this.grant(keys, token, o, left.fences, left.sentAt + o.ttlMs);
      }
      return new LockTimeoutError(
        keys.map((k) => k.name),
        Date.now() - started,
        last ? holderMs(last) : undefined,
      );
    } catch (err) {
      if (inLine) await this.abandon(keys, token, o);
      throw err;
    } finally {
      for (const stop of unlisten) stop();
    }
  }

  /** After an error or abort while in line: leave it, and release the lock if it was handed to us. */
  private async abandon(
    keys: LockRedisKeys[],
    token: string,
    o: ResolvedLockOptions,
  ): Promise<void> {
    try {
      const left = await this.leaveLine(keys[0], token);
      if (left.granted)
        await this.releaseLock(this.grant(keys, token, o, left.fences, left.sentAt));
    } catch {
      // Redis is unreachable: the entry lapses by its deadline, a handed lock by its TTL.
    }
  }

  private async attempt(
    keys: LockRedisKeys[],
    token: string,
    o: ResolvedLockOptions,
    join: boolean,
  ): Promise<Attempt> {
    const redisKeys: string[] = [];
    for (const k of keys) redisKeys.push(k.value, k.fence, k.line, k.entries);
    const sentAt = Date.now();
    let reply: number[];
    try {
      reply = (await this.connection.run(LOCK_SCRIPTS.acquire, redisKeys, [
        token,
        o.ttlMs,
        o.fencing ? 1 : 0,
        o.fair ? 1 : 0,
        join ? 1 : 0,
        Math.max(1_000, 3 * o.retryIntervalMs),
      ])) as number[];
    } catch (err) {
      // The attempt may still run later (e.g. from the client's offline queue after a reconnect)
      // and take the lock for a token nobody holds. A release queued behind it on the same
      // connection undoes exactly that, instead of leaving the key blocked for a whole TTL.
      this.connection
        .run(LOCK_SCRIPTS.release, releaseKeys(keys), [token, this.connection.isCluster ? 1 : 0])
        .catch(() => undefined);
      throw err;
    }
    return reply[0] === 1
      ? { granted: true, redisNow: reply[1], sentAt, fences: reply.slice(2), wait: 0 }
      : { granted: false, redisNow: reply[1], sentAt, fences: [], wait: reply[2] };
  }

  private async leaveLine(k: LockRedisKeys, token: string): Promise<Attempt> {
    const sentAt = Date.now();
    const reply = (await this.connection.run(
      LOCK_SCRIPTS.leaveLine,
      [k.value, k.fence, k.line, k.entries],
      [token],
    )) as number[];
    return { granted: reply[0] === 1, redisNow: reply[1], sentAt, fences: reply.slice(2), wait: 0 };
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

function holderMs(attempt: Attempt): number | undefined {
  return attempt.wait >= 0 ? attempt.wait : undefined;
}

function releaseKeys(keys: readonly LockRedisKeys[]): string[] {
  const out: string[] = [];
  for (const k of keys) out.push(k.value, k.fence, k.line, k.entries, k.channel);
  return out;
}
