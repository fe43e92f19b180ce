import { LockTimeoutError } from '../errors/lock-timeout.error';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import type { ResolvedLockOptions } from '../options/resolve-options';
import type { RedisLockConnection } from '../redis/redis-connection';
import { WakeSignal } from '../waiting/wake-signal';
import type { Lock } from './lock';
import { waiterChannel, type LockRedisKeys } from './lock-keys';
import { LINE_ENTRY_TTL_MS, LINE_RENEW_MS, sharedScriptKeys } from './lock-store';
import { LOCK_SCRIPTS } from './lock-scripts';
import { holderDeadline } from '../waiting/grant-deadline';

/** Creates the Lock handle of a shared grant (and registers it as held). */
export type GrantShared = (token: string, fence: number, expiresAt: number) => Lock;

/**
 * Shared mode (read locks) of single-key locks on one Redis. Shared holders stand in a zset
 * (`<lock>:shared`) and put the sentinel `!shared` in the lock's value, so exclusive locks keep
 * their fast path unchanged (their SET NX fails on the sentinel) and wait in the same fair line.
 * A waiting shared caller stands in that line too (a reader entry) and checks again when woken
 * ('w'), handed ('h'), or once per renewal period (which also keeps its entry live).
 *
 * `fence` of a shared grant is the lock's fence counter as it is (the fence of the latest
 * exclusive grant, `0` when there was none within `fenceTtlMs` or fencing is off): it tells which
 * writer's state a reader sees; shared grants never increment it, so only exclusive grants
 * strictly increase it.
 */
export class SharedLocks {
  /** Tokens of the shared locks handed out (and not yet released or lost). */
  private readonly shared = new WeakSet<Lock>();

  constructor(
    private readonly connection: RedisLockConnection,
    /** Makes tokens as exclusive locks do (instance tag first: `inspect` names the owner). */
    private readonly newToken: () => string,
  ) {}

  /** Whether `lock` is a shared lock of this instance. */
  owns(lock: Lock): boolean {
    return this.shared.has(lock);
  }

  /** Throws `RedisLockOptionsError` when shared mode cannot serve these keys. */
  check(keys: readonly LockRedisKeys[], o: ResolvedLockOptions): void {
    // The call's own option only: resolveLockOptions leaves the module's default out of them.
    if (o.waitForReplicas) {
      throw new RedisLockOptionsError(
        'waitForReplicas',
        o.waitForReplicas,
        "no value with mode 'shared'",
      );
    }
    if (this.connection.nodes.length > 0) {
      throw new RedisLockOptionsError('mode', 'shared', "'exclusive' in quorum mode (nodes)");
    }
    if (keys.length !== 1) {
      throw new RedisLockOptionsError('mode', 'shared', "'exclusive' for a multi-key lock");
    }
  }

  /** Acquires `k` in shared mode within `o.waitMs`, or returns the timeout. */
  async obtain(
    k: LockRedisKeys,
    o: ResolvedLockOptions,
    started: number,
    grant: GrantShared,
  ): Promise<Lock | LockTimeoutError> {
    const token = this.newToken();
    const wait = o.waitMs > 0;
    let last = await this.attempt(k, token, o, wait);
    if (last.granted) return this.granted(grant(token, last.fence, last.expiresAt));
    if (!wait) return new LockTimeoutError([k.name], 0, holderMs(last.wait));
    const wake = new WakeSignal(
      (m) => m === 'f' || m === `w ${token}` || m.startsWith(`h ${token} `),
    );
    const unlisten: Array<() => void> = [];
    let done = false;
    try {
      // 'f' comes on the lock's channel, what is meant for this waiter on its waiter channel.
      for (const channel of [k.channel, waiterChannel(k.channel, token)]) {
        try {
          unlisten.push(await this.connection.hub.listen(channel, wake.push));
        } catch {
          // No subscription: the renewal period paces this waiter.
        }
      }
      const deadline = started + o.waitMs;
      for (;;) {
        const left = deadline - Date.now();
        if (left <= 0) break;
        const message = await wake.wait(Math.min(left, LINE_RENEW_MS), o.signal);
        if (message?.startsWith('h ')) {
          // Handed with other shared waiters by a shared caller: granted at Redis time.
          const [, , fence, , ttl] = message.split(' ');
          done = true;
          return this.granted(grant(token, Number(fence), this.deadline(last.sentAt, Number(ttl))));
        }
        // Woken, or a period passed: check again (keeps the place, renews the entry).
        last = await this.attempt(k, token, o, true);
        if (last.granted) {
          done = true;
          return this.granted(grant(token, last.fence, last.expiresAt));
        }
      }
      return new LockTimeoutError([k.name], Date.now() - started, holderMs(last.wait));
    } finally {
      for (const stop of unlisten) stop();
      // Gave up (timeout, abort, failure): leave the line, returning a grant that came meanwhile.
      if (!done) await this.release(k, token).catch(() => undefined);
    }
  }

  /** Releases a shared hold; `false` when it was not held any more. */
  async release(k: LockRedisKeys, token: string): Promise<boolean> {
    const released = await this.connection.run(LOCK_SCRIPTS.releaseShared, sharedScriptKeys(k), [
      token,
      this.connection.isCluster ? 1 : 0,
      this.connection.options.fenceTtlMs,
    ]);
    return released === 1;
  }

  /** Extends a shared hold to `ttlMs` (`0`: only checks it); `false` when it is not held. */
  async extend(k: LockRedisKeys, token: string, ttlMs: number): Promise<boolean> {
    const ok = await this.connection.run(
      LOCK_SCRIPTS.extendShared,
      [k.value, k.shared],
      [token, ttlMs],
    );
    return ok === 1;
  }

  private deadline(sentAt: number, ms: number): number {
    return holderDeadline(sentAt, ms, this.connection.options.clockDriftFactor);
  }

  private granted(lock: Lock): Lock {
    this.shared.add(lock);
    return lock;
  }

  private async attempt(k: LockRedisKeys, token: string, o: ResolvedLockOptions, wait: boolean) {
    const sentAt = Date.now();
    let reply: number[];
    // As for an exclusive attempt: it may still run later (e.g. from the client's offline queue)
    // and take a read hold for a token nobody holds; a release queued behind it on the same
    // connection undoes that, instead of keeping writers out for a whole TTL, and once more on
    // its late reply (Redis may have run the two out of order).
    const undo = () => void this.release(k, token).catch(() => undefined);
    try {
      reply = (await this.connection.run(
        LOCK_SCRIPTS.acquireShared,
        sharedScriptKeys(k),
        [
          token,
          o.ttlMs,
          wait ? 1 : 0,
          LINE_ENTRY_TTL_MS,
          this.connection.isCluster ? 1 : 0,
          o.fencing ? 1 : 0,
        ],
        undo,
      )) as number[];
    } catch (err) {
      undo();
      throw err;
    }
    return reply[0] === 1
      ? {
          granted: true,
          fence: reply[1],
          expiresAt: this.deadline(sentAt, reply[2]),
          sentAt,
          wait: 0,
        }
      : { granted: false, fence: 0, expiresAt: 0, sentAt, wait: reply[2] };
  }
}

function holderMs(wait: number): number | undefined {
  return wait >= 0 ? wait : undefined;
}
