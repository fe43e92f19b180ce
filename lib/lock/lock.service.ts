import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes, randomFillSync } from 'node:crypto';
import { BeforeApplicationShutdown, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { LockLostError } from '../errors/lock-lost.error';
import type { LockLostEvent } from '../events/redis-lock-event-map';
import { RedisLockEvents } from '../events/redis-lock-events';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { LockQuorumError } from '../errors/lock-quorum.error';
import { LockReplicationError } from '../errors/lock-replication.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import { LockUpgradeError } from '../errors/lock-upgrade.error';
import type {
  BatchLockOptions,
  LockOptions,
  WaitForReplicasOptions,
  WithLockOptions,
} from '../interfaces/lock-options.interface';
import {
  DEFAULT_REPLICA_WAIT,
  resolveLockOptions,
  type ResolvedLockOptions,
} from '../options/resolve-options';
import { RedisLockConnection } from '../redis/redis-connection';
import { holderDeadline } from '../waiting/grant-deadline';
import { keepExtended } from '../waiting/keep-extended';
import { checkInt } from '../options/validate';
import { LockMetrics, UNLABELLED } from '../observability/metrics';
import { LockTracing } from '../observability/tracing';
import { LineRenewal } from '../waiting/line-renewal';
import type { LockInspection } from './lock-inspection';
import { LOCK_SCRIPTS } from './lock-scripts';
import { WakeSignal } from '../waiting/wake-signal';
import { Lock, type LockOwner } from './lock';
import { LockBatches, type LockBatchFn } from './lock-batches';
import { holderRemainingMs, LockCohort, type CohortHost } from './lock-cohort';
import { checkLockNames, lockRedisKeys, type LockRedisKeys } from './lock-keys';
import {
  LINE_RENEW_MS,
  type LineEntry,
  type LineStatus,
  type LockAttempt,
  type LockStore,
} from './lock-store';
import { QuorumLockStore } from './quorum-lock-store';
import { SharedLocks } from './shared-locks';
import { SingleNodeLockStore } from './single-node-lock-store';

/** Random bytes drawn in bulk for tokens (one system call per 256 tokens). */
const TOKEN_POOL = Buffer.alloc(12 * 256);
let tokenOffset = TOKEN_POOL.length;

/**
 * Makes fresh acquisition tokens of 43 hex digits: the instance's 8-digit tag (who), the local
 * clock in ms as 11 digits (since when: a line entry's join time) and 96 random bits (see
 * docs/locks.md). The tag + time head is built once per ms.
 */
function tokenMaker(tag: string): () => string {
  let headMs = 0;
  let head = '';
  return () => {
    if (tokenOffset === TOKEN_POOL.length) {
      randomFillSync(TOKEN_POOL);
      tokenOffset = 0;
    }
    tokenOffset += 12;
    const now = Date.now();
    if (now !== headMs) {
      headMs = now;
      head = tag + now.toString(16);
    }
    return head + TOKEN_POOL.toString('hex', tokenOffset - 12, tokenOffset);
  };
}

/** How long an instance's owner record lives, and how often it is written again, in ms. */
const OWNER_TTL_MS = 60_000;
const OWNER_REFRESH_MS = 20_000;

/** `withLockBatch`: default and largest `maxBatch`. */
const DEFAULT_MAX_BATCH = 100;
const MAX_BATCH = 10_000;

/** At most this many line entries are shown by `inspect`. */
const INSPECT_LINE_MAX = 100;

/** How often locks that ran out unreleased are dropped from what this instance holds, in ms. */
const SWEEP_MS = 5_000;

/** Lock names whose recent hold time is remembered (for `Retry-After`); the oldest go first. */
const HOLD_TIMES_KEPT = 1_000;

/**
 * Distributed locks on Redis: token-owned, atomic (one Lua script per operation), fair by default
 * (FIFO line with direct handoff, woken by pub/sub), fenced, and extended automatically while a
 * `withLock` callback runs. With the module's `nodes` option, locks use quorum mode (Redlock) on
 * independent masters instead: same API, not fair, fenced with one extra round trip per grant.
 */
@Injectable()
export class LockService implements LockOwner, OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('LockService');
  /** Every lock this instance holds (as far as it knows: released and lost ones are dropped). */
  private readonly held = new Set<Lock>();
  /** Per lock name, the lock this instance acquired last (what key-based calls act on). */
  private readonly byName = new Map<string, Lock>();
  private sweepTimer?: NodeJS.Timeout;
  private readonly context = new AsyncLocalStorage<ReadonlyMap<string, Lock>>();
  private readonly defaults: ResolvedLockOptions;
  private readonly store: LockStore;
  /** Local cohorts by lock value key (single-key locks with `maxLocalHandoffs > 0`). */
  private readonly cohorts = new Map<string, LockCohort>();
  /** Every cohort with a caller holding or waiting (shared or a caller's own), for shutdown. */
  private readonly liveCohorts = new Set<LockCohort>();
  /** Set when the application shuts down: acquisitions are refused from then on. */
  private closing = false;
  private readonly renewal: LineRenewal<LineEntry, LineStatus>;
  private readonly cohortHost: CohortHost;
  /** Per lock value key, a moving average of how long this process held it (ms). */
  private readonly holdTimes = new Map<string, number>();
  /** Shared mode (`mode: 'shared'`, read locks). */
  private readonly shared: SharedLocks;
  /** This instance's tag: the first 8 hex digits of its tokens, mapped to `instanceId` in Redis. */
  private readonly tag = randomBytes(4).toString('hex');
  private readonly token = tokenMaker(this.tag);
  private ownerTimer?: NodeJS.Timeout;
  private readonly metrics = new LockMetrics();
  private readonly tracing = new LockTracing();
  private readonly batches = new LockBatches();

  constructor(
    private readonly connection: RedisLockConnection,
    /** The module's events: `lock.lost` and `lock.timeout` are emitted on it. */
    readonly events: RedisLockEvents = new RedisLockEvents(),
  ) {
    this.defaults = connection.options.lock;
    this.store =
      connection.nodes.length > 0
        ? new QuorumLockStore(connection.nodes, connection.options.clockDriftFactor)
        : new SingleNodeLockStore(connection);
    this.shared = new SharedLocks(connection, this.token);
    this.renewal = new LineRenewal(
      (entries) => this.store.renew(entries),
      LINE_RENEW_MS,
      (err) => this.warn('renewing places in lock lines failed', err),
    );
    this.cohortHost = {
      store: this.store,
      renewal: this.renewal,
      maxLocalHandoffs: connection.options.maxLocalHandoffs,
      newToken: this.token,
      deadline: (sentAt, ms) => holderDeadline(sentAt, ms, connection.options.clockDriftFactor),
      grant: (key, token, o, fence, expiresAt, cohort) =>
        this.grant([key], token, o, [fence], expiresAt, cohort),
      forget: (lock) => this.forget(lock),
      listen: (channel, onMessage) => this.store.listen(channel, onMessage),
      dispose: (cohort) => {
        this.liveCohorts.delete(cohort);
        if (this.cohorts.get(cohort.key.value) === cohort) this.cohorts.delete(cohort.key.value);
      },
      warn: (what, err) => this.warn(what, err),
      holdTime: (key) => this.holdTimes.get(key.value),
      handedOff: (lock, kind) => this.metrics.handoff(lock.label, kind),
    };
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
    // A shared hold joins nothing exclusive: upgrading could deadlock (see LockUpgradeError).
    if (joined && o.mode !== 'shared' && this.shared.owns(joined)) {
      throw new LockUpgradeError(keys[0].name);
    }
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
    const { maxBatch = DEFAULT_MAX_BATCH, ...lockOptions } = options ?? {};
    checkInt('maxBatch', maxBatch, 1, MAX_BATCH);
    for (const shared of ['signal', 'skipIfLocked'] as const) {
      if ((lockOptions as WithLockOptions)[shared] !== undefined) {
        throw new RedisLockOptionsError(
          shared,
          (lockOptions as WithLockOptions)[shared],
          'nothing: a batch serves several callers (see withLockBatch)',
        );
      }
    }
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

  /**
   * @internal callers of this instance waiting in its local cohort for `key` (tests, inspection)
   */
  localWaiters(key: string, keyPrefix = this.defaults.keyPrefix): number {
    return this.cohorts.get(lockRedisKeys(keyPrefix, key).value)?.waiting ?? 0;
  }

  /** Releases every lock this instance holds; resolves how many were still held. */
  async releaseAll(): Promise<number> {
    const results = await Promise.allSettled([...this.held].map((l) => this.releaseLock(l)));
    return results.filter((r) => r.status === 'fulfilled' && r.value).length;
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
    const k = lockRedisKeys(o.keyPrefix, name);
    const reply = (await this.connection.run(
      LOCK_SCRIPTS.inspect,
      [k.value, k.fence, k.line, k.entries, k.shared],
      [INSPECT_LINE_MAX],
    )) as Array<string | number | null>;
    const [value, pttl, fence, lineLength, sharedCount] = reply;
    const token = typeof value === 'string' ? value.replace(/\*$/, '') : undefined;
    const holders = reply.slice(5, 5 + Number(sharedCount)).map(String);
    const holder = holders.length > 0 ? undefined : token;
    const waiting: Array<{ token: string; mode: string }> = [];
    for (let i = 5 + holders.length; i < reply.length; i += 2) {
      waiting.push({ token: String(reply[i]), mode: String(reply[i + 1]).split(':')[3] });
    }
    const owners = await this.owners([holder, ...holders, ...waiting.map((w) => w.token)]);
    return {
      key: name,
      held: token !== undefined,
      ...(holder !== undefined && { owner: owners.get(holder.slice(0, 8)) }),
      ...(token !== undefined && { ttlMs: Number(pttl) >= 0 ? Number(pttl) : undefined }),
      ...(holders.length > 0 && {
        sharedHolders: holders.map((t) => ({
          owner: owners.get(t.slice(0, 8)),
          since: tokenTime(t),
        })),
      }),
      fence: fence === null ? undefined : Number(fence),
      lineLength: Number(lineLength),
      line: waiting.map((w) => ({
        owner: owners.get(w.token.slice(0, 8)),
        since: tokenTime(w.token),
        mode: w.mode === 'h' ? 'handoff' : 'wake',
      })),
      localWaiters: this.localWaiters(name, o.keyPrefix),
    };
  }

  /** Registers this instance's tag -> `instanceId` (Nest lifecycle hook); refreshed while it runs. */
  onModuleInit(): void {
    if (!this.store.lines) return;
    const write = () =>
      this.connection
        .call('lock owner SET', (c) =>
          c.set(this.ownerKey(this.tag), this.connection.options.instanceId, 'PX', OWNER_TTL_MS),
        )
        .catch((err) => this.warn('registering the instance id failed', err));
    this.ownerTimer = setInterval(write, OWNER_REFRESH_MS);
    this.ownerTimer.unref();
    // Not awaited: a slow Redis must not hold up the start (connectTimeoutMs decides that).
    void write();
  }

  /** Nest lifecycle hook: releases what this instance holds when the application shuts down. */
  async beforeApplicationShutdown(): Promise<void> {
    this.closing = true;
    clearInterval(this.ownerTimer);
    this.metrics.close();
    this.renewal.close();
    // Waiting callers are told, and this instance leaves every line it stands in, before its
    // locks are released: a lock must not be handed to an instance that is going away.
    const stopping = new RedisUnavailableError('lock acquire', 'the module is shutting down');
    await Promise.allSettled([...this.liveCohorts].map((c) => c.close(stopping)));
    this.liveCohorts.clear();
    await this.releaseAll();
  }

  /** @internal */
  releaseLock(lock: Lock): Promise<boolean> {
    // The release is sent first: a waiter parked in another process is woken by it, and the
    // bookkeeping below (same tick, so no caller can tell the order) would only delay it.
    const shared = this.shared.owns(lock);
    const released = shared
      ? this.shared.release(lock.redisKeys[0], lock.token)
      : lock.cohort
        ? lock.cohort.release(lock)
        : this.store.release(lock.redisKeys, lock.token);
    this.forget(lock);
    if (!lock.isEnded) this.metrics.released(lock.label, Date.now() - lock.acquiredAt);
    // Released after its TTL ran out (a callback that outlived it): it was lost before.
    lock.end(lock.isLost ? ttlRanOut(lock) : undefined);
    if (!shared && lock.redisKeys.length === 1) {
      this.recordHold(lock.redisKeys[0].value, lock.acquiredAt);
    }
    return released;
  }

  /**
   * @internal
   * @throws LockReplicationError when the lock's `waitForReplicas` was not satisfied (the lock
   *   stays held and extended on the master)
   */
  async extendLock(lock: Lock, ttlMs: number): Promise<boolean> {
    const ttl = resolveLockOptions(this.defaults, { ttlMs }).ttlMs;
    const w = lock.waitForReplicas;
    const sentAt = Date.now();
    const extension = this.shared.owns(lock)
      ? {
          held: await this.shared.extend(lock.redisKeys[0], lock.token, ttl),
          expiresAt: holderDeadline(sentAt, ttl, this.connection.options.clockDriftFactor),
        }
      : await this.store.extend(lock.redisKeys, lock.token, ttl, w);
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
    this.forget(lock);
    lock.end(
      new LockLostError(lock.keys, 'it expired or another owner holds it now'),
      lock.expiresAt <= Date.now() ? 'expired' : 'taken',
    );
    lock.cohort?.lost(lock);
    return false;
  }

  /** @internal */
  async isHeldLock(lock: Lock): Promise<boolean> {
    if (this.shared.owns(lock)) return this.shared.extend(lock.redisKeys[0], lock.token, 0);
    return this.store.isHeld(lock.redisKeys, lock.token);
  }

  /** @internal */
  lockLost(lock: Lock, why: LockLostEvent['reason']): void {
    this.metrics.lost(lock.label, why);
    if (this.events.hasListeners('lock.lost')) {
      this.events.emit('lock.lost', { keys: lock.keys, reason: why });
    }
  }

  /** A Lock as given, or the lock this instance acquired last on a key, unless it ran out. */
  private find(lockOrKey: Lock | string): Lock | undefined {
    if (lockOrKey instanceof Lock) return lockOrKey;
    const lock = this.byName.get(checkLockNames(lockOrKey)[0]);
    if (!lock || !lock.isLost) return lock;
    this.drop(lock);
    return undefined;
  }

  /** Forgets a lock that ran out unreleased (its TTL is over by this process's clock). */
  private drop(lock: Lock): void {
    this.forget(lock);
    lock.end(ttlRanOut(lock));
    lock.cohort?.lost(lock);
  }

  private remember(lock: Lock): void {
    this.held.add(lock);
    for (const name of lock.keys) this.byName.set(name, lock);
    if (!this.sweepTimer) {
      // Code that lets locks run out (a TTL used as a throttle) must not make `held` grow.
      this.sweepTimer = setInterval(() => {
        for (const l of this.held) if (l.isLost) this.drop(l);
        if (this.held.size === 0) {
          clearInterval(this.sweepTimer);
          this.sweepTimer = undefined;
        }
      }, SWEEP_MS);
      this.sweepTimer.unref();
    }
  }

  private forget(lock: Lock): void {
    this.held.delete(lock);
    for (const name of lock.keys) if (this.byName.get(name) === lock) this.byName.delete(name);
  }

  /** Keeps a moving average of hold times per lock (bounded: the oldest names are dropped). */
  private recordHold(key: string, acquiredAt: number): void {
    const held = Date.now() - acquiredAt;
    const before = this.holdTimes.get(key);
    this.holdTimes.delete(key);
    this.holdTimes.set(key, before === undefined ? held : 0.8 * before + 0.2 * held);
    if (this.holdTimes.size > HOLD_TIMES_KEPT) {
      this.holdTimes.delete(this.holdTimes.keys().next().value as string);
    }
  }

  private ownerKey(tag: string): string {
    return `${this.defaults.keyPrefix}owner:{${tag}}`;
  }

  /** Instance ids by tag, for the tags of `tokens` (one GET per distinct tag, pipelined). */
  private async owners(tokens: Array<string | undefined>): Promise<Map<string, string>> {
    const tags = [...new Set(tokens.filter((t) => t !== undefined).map((t) => t!.slice(0, 8)))];
    const owners = new Map<string, string>();
    if (tags.length === 0) return owners;
    const ids = await this.connection.call('lock owner GET', (c) =>
      Promise.all(tags.map((tag) => c.get(this.ownerKey(tag)))),
    );
    tags.forEach((tag, i) => ids[i] !== null && owners.set(tag, ids[i]!));
    return owners;
  }

  private warn(what: string, err: unknown): void {
    this.logger.warn(`${what}: ${err instanceof Error ? err.message : String(err)}`);
  }

  /** Validates the keys and options of a call (typed errors) and applies the defaults. */
  private resolve(
    key: string | string[],
    options: LockOptions | WithLockOptions | undefined,
  ): { o: ResolvedLockOptions; keys: LockRedisKeys[] } {
    const o = resolveLockOptions(this.defaults, options);
    const keys = checkLockNames(key).map((name) => lockRedisKeys(o.keyPrefix, name));
    if (o.mode === 'shared') this.shared.check(keys, o);
    else this.store.check(keys, o);
    return { o, keys };
  }

  /** Acquires, or returns the timeout error (not thrown, so tryAcquire needs no try/catch). */
  private async obtain(
    keys: LockRedisKeys[],
    o: ResolvedLockOptions,
  ): Promise<Lock | LockTimeoutError> {
    o.signal?.throwIfAborted();
    if (this.closing) {
      throw new RedisUnavailableError('lock acquire', 'the module is shutting down');
    }
    const started = Date.now();
    const label = o.label ?? UNLABELLED;
    const span = this.tracing.start(label);
    const counted = this.metrics.waitStarted(label);
    let result: Lock | LockTimeoutError;
    try {
      result = await this.obtainFrom(keys, o, started);
    } catch (err) {
      const aborted = o.signal?.aborted === true;
      const outcome = aborted ? 'timeout' : 'error';
      this.metrics.acquired(label, outcome, Date.now() - started);
      if (counted) this.metrics.waitEnded(label);
      if (span) this.tracing.end(span, outcome, Date.now() - started, undefined, err);
      if (aborted && this.events.hasListeners('lock.timeout')) {
        const waitedMs = Date.now() - started;
        const names = keys.map((k) => k.name);
        this.events.emit('lock.timeout', { keys: names, waitedMs, reason: 'aborted' });
      }
      throw err;
    }
    const timedOut = result instanceof LockTimeoutError;
    const outcome = timedOut ? 'timeout' : 'acquired';
    this.metrics.acquired(label, outcome, Date.now() - started);
    if (counted) this.metrics.waitEnded(label);
    if (span)
      this.tracing.end(
        span,
        outcome,
        Date.now() - started,
        timedOut ? undefined : (result as Lock).fences[0],
      );
    if (timedOut && this.events.hasListeners('lock.timeout')) {
      const { keys: names, waitedMs } = result as LockTimeoutError;
      this.events.emit('lock.timeout', { keys: names, waitedMs, reason: 'timeout' });
    }
    return result;
  }

  private async obtainFrom(
    keys: LockRedisKeys[],
    o: ResolvedLockOptions,
    started: number,
  ): Promise<Lock | LockTimeoutError> {
    let result: Lock | LockTimeoutError;
    if (o.mode === 'shared') {
      result = await this.shared.obtain(keys[0], o, started, (token, fence, expiresAt) =>
        this.grant(keys, token, o, [fence], expiresAt),
      );
    } else if (keys.length === 1 && this.store.lines) {
      result = await this.cohortOf(keys[0]).acquire(o, started);
    } else {
      const token = this.token();
      const first = await this.store.attempt(keys, token, o, 'none');
      result = first.granted
        ? this.grant(keys, token, o, first.fences, first.expiresAt)
        : o.waitMs === 0
          ? this.gaveUp(keys, first, 0)
          : await this.wait(keys, o, started);
    }
    if (result instanceof Lock && o.waitForReplicas !== false) {
      const w = o.waitForReplicas ?? (await this.defaultReplicaWait(result));
      if (w) await this.confirmReplicated(result, w);
    }
    return result;
  }

  /**
   * Sentinel, `waitForReplicas` unset: `DEFAULT_REPLICA_WAIT` when the master has (or had) a
   * replica, also for the lock's extensions; nothing elsewhere. A failure to tell releases the
   * lock and fails the acquisition.
   */
  private async defaultReplicaWait(lock: Lock): Promise<WaitForReplicasOptions | undefined> {
    const watch = this.connection.replicaWatch;
    if (!watch || this.shared.owns(lock)) return undefined;
    let replicas: number;
    try {
      replicas = await watch.replicas();
    } catch (err) {
      await this.releaseLock(lock).catch(() => undefined);
      throw err;
    }
    if (replicas === 0) return undefined;
    lock.waitForReplicas = DEFAULT_REPLICA_WAIT;
    return DEFAULT_REPLICA_WAIT;
  }

  /** The cohort a single-key acquisition joins: shared per key, or its own with cohorts off. */
  private cohortOf(key: LockRedisKeys): LockCohort {
    let cohort =
      this.connection.options.maxLocalHandoffs === 0 ? undefined : this.cohorts.get(key.value);
    if (!cohort) {
      cohort = new LockCohort(this.cohortHost, key);
      if (this.connection.options.maxLocalHandoffs > 0) this.cohorts.set(key.value, cohort);
      this.liveCohorts.add(cohort);
    }
    return cohort;
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
   * Waiting outside any line (multi-key locks, quorum mode): sleeps until a release message for
   * one of the keys (the blocking lock is marked so that its release announces itself), the
   * holder's PTTL or the jittered `retryIntervalMs` poll, then tries again with a fresh token, so
   * that an attempt that failed (or timed out and may still run) is never confused with the one
   * that succeeds.
   */
  private async wait(
    keys: LockRedisKeys[],
    o: ResolvedLockOptions,
    started: number,
  ): Promise<Lock | LockTimeoutError> {
    const deadline = started + o.waitMs;
    const wake = new WakeSignal();
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
        const token = this.token();
        last = await this.store.attempt(keys, token, o, 'mark');
        if (last.granted) return this.grant(keys, token, o, last.fences, last.expiresAt);
        const left = deadline - Date.now();
        if (left <= 0) break;
        const poll = o.retryIntervalMs * (0.5 + Math.random() / 2);
        await wake.wait(Math.min(left, poll, last.wait > 0 ? last.wait + 1 : Infinity), o.signal);
      }
      return this.gaveUp(keys, last, Date.now() - started);
    } finally {
      for (const stop of unlisten) stop();
    }
  }

  private grant(
    keys: LockRedisKeys[],
    token: string,
    o: ResolvedLockOptions,
    fences: number[],
    expiresAt: number,
    cohort?: LockCohort,
  ): Lock {
    const lock = Lock.create(
      this,
      keys,
      token,
      o.fencing ? fences : fences.map(() => 0),
      expiresAt,
      o.ttlMs,
      o.waitForReplicas || undefined,
      cohort,
    );
    if (o.label !== undefined) lock.label = o.label;
    this.remember(lock);
    return lock;
  }

  /**
   * Extends the lock whenever a third of its TTL has passed, until the returned function is
   * called. Never throws: a lost lock aborts `lock.signal`; a failed extension is retried until
   * the lock would have expired, and then aborts it too.
   */
  private keepExtended(lock: Lock): () => void {
    return keepExtended(
      lock,
      (ms) => this.extendLock(lock, ms),
      (detail) => lock.end(new LockLostError(lock.keys, `it ${detail}`), 'unreachable'),
    );
  }
}

function holderMs(attempt: LockAttempt): number | undefined {
  const remaining = holderRemainingMs(attempt);
  return remaining >= 0 ? remaining : undefined;
}

function ttlRanOut(lock: Lock): LockLostError {
  return new LockLostError(
    lock.keys,
    `its TTL ran out at ${new Date(lock.expiresAt).toISOString()}`,
  );
}

/** When a token was made (epoch ms, by its maker's clock): digits 9 to 19 of it. */
function tokenTime(token: string): number {
  return parseInt(token.slice(8, 19), 16);
}
