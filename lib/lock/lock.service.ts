// The public face of locks: checks each call's keys and options, then hands it to the part
// that does the work: lock-acquirer.ts acquires (waiting in lock-cohorts.ts, polled-wait.ts or
// shared-locks.ts), lock-handles.ts releases and extends, held-locks.ts remembers what this
// instance holds, lock-inspector.ts reads a lock for `inspect`. Starts and stops them with the
// module.
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { BeforeApplicationShutdown, Injectable, type OnModuleInit } from '@nestjs/common';
import { RedactingLogger } from '../redaction/redacting-logger';
import { RedisLockEvents } from '../events/redis-lock-events';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import { LockLostError } from '../errors/lock-lost.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import { LockUpgradeError } from '../errors/lock-upgrade.error';
import type {
  BatchLockOptions,
  LockOptions,
  WithLockOptions,
} from '../interfaces/lock-options.interface';
import { resolveLockOptions, type ResolvedLockOptions } from '../options/resolve-options';
import { RedisLockConnection } from '../redis/redis-connection';
import { holderDeadline } from '../waiting/grant-deadline';
import { LockMetrics } from '../observability/metrics';
import { HeldLocks } from './held-locks';
import type { Lock } from './lock';
import { LockAcquirer } from './lock-acquirer';
import { checkBatchOptions, LockBatches, type LockBatchFn } from './lock-batches';
import { LockCohorts } from './lock-cohorts';
import { LockHandles } from './lock-handles';
import type { LockInspection } from './lock-inspection';
import { LockInspector } from './lock-inspector';
import { checkLockNames, lockRedisKeys, type FenceScope, type LockRedisKeys } from './lock-keys';
import type { LockStore } from './lock-store';
import { tokenMaker } from './lock-tokens';
import { QuorumLockStore } from './quorum-lock-store';
import { SharedLocks } from './shared-locks';
import { SingleNodeLockStore } from './single-node-lock-store';

/**
 * Distributed locks on Redis: token-owned, atomic (one Lua script per operation), fair by default
 * (FIFO line with direct handoff, woken by pub/sub), fenced, and extended automatically while a
 * `withLock` callback runs. With the module's `nodes` option, locks use quorum mode (Redlock) on
 * independent masters instead: same API, not fair, fenced with one extra round trip per grant.
 */
@Injectable()
export class LockService implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new RedactingLogger('LockService');
  /** Every lock this instance holds (held-locks.ts). */
  private readonly held = new HeldLocks();
  private readonly context = new AsyncLocalStorage<ReadonlyMap<string, Lock>>();
  private readonly defaults: ResolvedLockOptions;
  private readonly store: LockStore;
  /** Single-key locks on a line store wait in local cohorts (lock-cohorts.ts). */
  private readonly cohorts: LockCohorts;
  /** Shared mode (`mode: 'shared'`, read locks). */
  private readonly shared: SharedLocks;
  /** This instance's tag: the first 8 hex digits of its tokens, mapped to `instanceId` in Redis. */
  private readonly tag = randomBytes(4).toString('hex');
  private readonly token = tokenMaker(this.tag);
  private readonly inspector: LockInspector;
  private readonly metrics = new LockMetrics();
  private readonly batches = new LockBatches();
  /** Release, extend and isHeld of the locks granted (lock-handles.ts). */
  private readonly handles: LockHandles;
  /** How acquisitions run, up to the grant (lock-acquirer.ts). */
  private readonly acquirer: LockAcquirer;
  /** Which fence counter the locks use (lock-keys.ts). */
  private readonly fences: FenceScope;

  constructor(
    private readonly connection: RedisLockConnection,
    /** The module's events: `lock.lost` and `lock.timeout` are emitted on it. */
    readonly events: RedisLockEvents = new RedisLockEvents(),
  ) {
    this.defaults = connection.options.lock;
    this.fences = connection.nodes.length > 0 ? 'lock' : connection.isCluster ? 'slot' : 'server';
    this.store =
      connection.nodes.length > 0
        ? new QuorumLockStore(connection.nodes, connection.options.clockDriftFactor)
        : new SingleNodeLockStore(connection);
    this.shared = new SharedLocks(connection, this.token);
    this.inspector = new LockInspector(connection, this.tag, (what, err) => this.warn(what, err));
    this.handles = new LockHandles(
      connection,
      this.store,
      this.shared,
      this.held,
      this.metrics,
      events,
    );
    this.cohorts = new LockCohorts({
      store: this.store,
      maxLocalHandoffs: connection.options.maxLocalHandoffs,
      tag: this.tag,
      newToken: this.token,
      deadline: (sentAt, ms) => holderDeadline(sentAt, ms, connection.options.clockDriftFactor),
      grant: (key, token, o, fence, expiresAt, cohort) =>
        this.acquirer.grant([key], token, o, [fence], expiresAt, cohort),
      forget: (lock) => this.held.forget(lock),
      listen: (channel, onMessage) => this.store.listen(channel, onMessage),
      isSubscribed: (channel) => this.store.isSubscribed(channel),
      warn: (what, err) => this.warn(what, err),
      holdTime: (key) => this.held.holdTime(key.value),
      handedOff: (lock, kind) => this.metrics.handoff(lock.label, kind),
    });
    this.acquirer = new LockAcquirer({
      connection,
      store: this.store,
      shared: this.shared,
      cohorts: this.cohorts,
      held: this.held,
      handles: this.handles,
      metrics: this.metrics,
      events,
      newToken: this.token,
    });
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
    const result = await this.acquirer.obtain(keys, o);
    if (result instanceof LockTimeoutError) throw result;
    return result;
  }

  /**
   * Like `acquire`, but resolves `null` instead of throwing when the lock could not be had within
   * `waitMs` (default `0`: one try).
   */
  async tryAcquire(key: string | string[], options?: LockOptions): Promise<Lock | null> {
    const { o, keys } = this.resolve(key, options);
    const result = await this.acquirer.obtain(keys, o);
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
    let joined = current && keys.every((k) => current.has(k.value)) && current.get(keys[0].value);
    // Only a lock this call chain still holds is joined: work it started that outlives the
    // release (or a lock found lost) waits for the lock like any caller.
    if (joined && (joined.isEnded || joined.isLost)) joined = undefined;
    // A shared hold joins nothing exclusive: upgrading could deadlock (see LockUpgradeError). Any
    // of the keys held shared counts: with only some of them held, the call waited for itself
    // until waitMs.
    if (current && o.mode !== 'shared') {
      const upgraded = keys.find((k) => {
        const held = current.get(k.value);
        return held && !held.isEnded && !held.isLost && this.shared.owns(held);
      });
      if (upgraded) throw new LockUpgradeError(upgraded.name);
    }
    if (joined) return fn(joined);

    const lock = await this.acquirer.obtain(keys, o);
    if (lock instanceof LockTimeoutError) {
      if (!o.skipIfLocked) throw lock;
      this.logger.debug(`skipped (skipIfLocked): ${lock.message}`);
      return undefined;
    }
    const stopExtending = o.autoExtend ? this.handles.keepExtended(lock) : undefined;
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
        // Not when the module's shutdown released it already (on a connection now closed).
        if (!this.held.released(lock)) await this.handles.releaseLock(lock);
      } catch (err) {
        // The lock expires by its TTL anyway; fn's outcome is what the caller needs to see.
        this.logger.warn(
          `release of ${lock.keys.join(', ')} failed${failed ? ' after the callback failed' : ''}: ${(err as Error).message}`,
        );
      }
    }
  }

  /**
   * Runs `fn` under the lock on `key` for a batch of items: `item` and the items that other
   * callers of this instance submit for the same key and the same `fn` (same function object)
   * while a batch runs. One acquisition serves the whole batch, so a hot key handles as many
   * items per second as batches allow, not one item per lock handoff (combining; see
   * docs/locks.md, Batches). `fn` gets the items in submission order and returns one result per
   * item in that order; an `Error` in place of a result rejects that item's caller only. A
   * batch that cannot get the lock (`LockTimeoutError`) or whose `fn` throws rejects all its
   * callers. Options are those of `withLock` (`signal` and `skipIfLocked` excepted: a batch is
   * shared), taken from the call that starts a batch, plus `maxBatch`.
   * @param options.maxBatch most items one batch takes (1 to 10,000) @default 100
   * @throws RedisLockOptionsError for a bad option, `signal` or `skipIfLocked`
   * @example
   * // one field, so that every call passes the same function
   * private readonly sell = (buyers: string[], lock: Lock) => this.sellUnits(buyers, lock.fence);
   * buy(sku: string, userId: string) {
   *   return this.locks.withLockBatch(`stock:${sku}`, userId, this.sell, { waitMs: 2000 });
   * }
   */
  async withLockBatch<T, R>(
    key: string | string[],
    item: T,
    fn: LockBatchFn<T, R>,
    options?: BatchLockOptions,
  ): Promise<R> {
    if (typeof fn !== 'function') throw new RedisLockOptionsError('fn', fn, 'a function');
    const { maxBatch, lockOptions } = checkBatchOptions(options);
    const { keys } = this.resolve(key, lockOptions);
    const lockId = keys.map((k) => k.value).join('\0');
    return this.batches.submit(lockId, fn, item, maxBatch, (items) =>
      this.withLock(key, (lock) => fn(items, lock), lockOptions),
    ) as Promise<R>;
  }

  /**
   * The lock of the innermost `withLock`/`@WithLock` running in this async call chain (the one
   * holding `key`, when given), so deep code can read `signal` or `fence`.
   */
  currentLock(key?: string): Lock | undefined {
    const store = this.context.getStore();
    if (!store) return undefined;
    // A released lock is not current (work started under it that outlives the release); a lost
    // one still is, so that its holder reads the aborted signal.
    const live = [...store.values()].filter((lock) => !lock.isReleased);
    if (key === undefined) return live.pop();
    return live.find((lock) => lock.keys.includes(key));
  }

  /**
   * Releases a lock (a `Lock`, or the lock this instance holds on `key` under the module's
   * `keyPrefix`: one taken with a per-call `keyPrefix` is released by its handle). Resolves `false`
   * when it was not held (any more).
   */
  async release(lockOrKey: Lock | string): Promise<boolean> {
    const lock = this.held.find(lockOrKey, this.defaultValueKey);
    return lock ? this.handles.releaseLock(lock) : false;
  }

  /** Sets the remaining TTL of a lock this instance holds; `false` when it is not held any more. */
  async extend(lockOrKey: Lock | string, ttlMs: number): Promise<boolean> {
    // Validated whether or not the lock is held, so that a bad TTL never passes silently.
    resolveLockOptions(this.defaults, { ttlMs });
    const lock = this.held.find(lockOrKey, this.defaultValueKey);
    return lock ? this.handles.extendLock(lock, ttlMs) : false;
  }

  /** Whether this instance holds the lock (checked in Redis). */
  async isHeld(lockOrKey: Lock | string): Promise<boolean> {
    const lock = this.held.find(lockOrKey, this.defaultValueKey);
    return lock ? this.handles.isHeldLock(lock) : false;
  }

  /** Whether anyone holds the lock on `key` (checked in Redis; by a majority in quorum mode). */
  async isLocked(key: string, options?: Pick<LockOptions, 'keyPrefix'>): Promise<boolean> {
    const o = resolveLockOptions(this.defaults, options);
    return this.store.isLocked(this.keysOf(o.keyPrefix, checkLockNames(key)[0]));
  }

  /**
   * @internal callers of this instance waiting in its local cohort for `key` (tests, inspection)
   */
  localWaiters(key: string, keyPrefix = this.defaults.keyPrefix): number {
    return this.cohorts.waiting(this.keysOf(keyPrefix, key));
  }

  /** Releases every lock this instance holds; resolves how many were still held. */
  async releaseAll(): Promise<number> {
    return this.held.releaseAll((l) => this.handles.releaseLock(l));
  }

  /**
   * What Redis shows of the lock on `key` right now: whether it is held, by which instance
   * (`instanceId` of the module that took it), its TTL left and fence counter, and its line of
   * waiting instances in order (one entry per instance and lock: callers of one instance wait in
   * its local cohort, counted by `localWaiters` for this instance). One Lua script plus one read
   * of the owner records. Not available in quorum mode (no lines there).
   * @example
   * const { held, owner, ttlMs, line } = await locks.inspect(`order:${id}`);
   */
  async inspect(key: string, options?: Pick<LockOptions, 'keyPrefix'>): Promise<LockInspection> {
    const o = resolveLockOptions(this.defaults, options);
    const name = checkLockNames(key)[0];
    if (!this.store.lines) {
      throw new RedisLockOptionsError('nodes', '(quorum mode)', 'a single Redis for inspect()');
    }
    return this.inspector.inspect(this.keysOf(o.keyPrefix, name), name, () =>
      this.localWaiters(name, o.keyPrefix),
    );
  }

  /** Registers this instance's tag -> `instanceId` (Nest lifecycle hook); refreshed while it runs. */
  onModuleInit(): void {
    if (this.store.lines) this.inspector.register();
  }

  /**
   * @internal What must end before this instance refuses callers and releases its locks at
   * shutdown: the module's queue workers draining (set by `RedisLockModule`). Nest calls the
   * shutdown hooks of one module's providers all at once, and a handler given `drainTimeoutMs`
   * to finish must still be able to take and keep locks meanwhile.
   */
  shutdownAfter?: () => Promise<unknown>;

  /** Nest lifecycle hook: releases what this instance holds when the application shuts down. */
  async beforeApplicationShutdown(): Promise<void> {
    // Its failure is the queue's to report (Nest awaits that hook too): the locks go all the same.
    await this.shutdownAfter?.().catch(() => undefined);
    // Waiting callers are told, and this instance leaves every line it stands in, before its
    // locks are released: a lock must not be handed to an instance that is going away.
    const stopping = new RedisUnavailableError('lock acquire', 'the module is shutting down');
    this.acquirer.refuseNew(stopping);
    this.inspector.close();
    this.metrics.close();
    await this.cohorts.close(stopping);
    await this.acquirer.settled();
    // A holder still running (a withLock callback, a request) learns it lost the lock, by its
    // signal, before the release lets anyone else take it.
    await this.held.releaseAll((lock) => {
      lock.end(new LockLostError(lock.keys, 'the module shut down and released it'), 'shutdown');
      return this.handles.releaseLock(lock);
    });
  }

  private warn(what: string, err: unknown): void {
    this.logger.warn(`${what}: ${err instanceof Error ? err.message : String(err)}`);
  }

  /** The keys of lock `name`, with the fence counter of this connection's kind (`FenceScope`). */
  private keysOf(prefix: string, name: string): LockRedisKeys {
    return lockRedisKeys(prefix, name, this.fences);
  }

  /** The value key of lock `name` under the module's `keyPrefix`: what key-based calls act on. */
  private readonly defaultValueKey = (name: string): string =>
    this.keysOf(this.defaults.keyPrefix, name).value;

  /** Validates the keys and options of a call (typed errors) and applies the defaults. */
  private resolve(
    key: string | string[],
    options: LockOptions | WithLockOptions | undefined,
  ): { o: ResolvedLockOptions; keys: LockRedisKeys[] } {
    const o = resolveLockOptions(this.defaults, options);
    const keys = checkLockNames(key).map((name) => this.keysOf(o.keyPrefix, name));
    if (o.mode === 'shared') this.shared.check(keys, o);
    else this.store.check(keys, o);
    return { o, keys };
  }
}
