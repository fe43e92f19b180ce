import type { WaitForReplicasOptions } from '../interfaces/lock-options.interface';
import type { ResolvedLockOptions } from '../options/resolve-options';
import type { RedisLockConnection } from '../redis/redis-connection';
import { clusterKeySlot } from '../redis/cluster-slot';
import { holderDeadline } from '../waiting/grant-deadline';
import { checkOneSlot, type LockRedisKeys } from './lock-keys';
import { LOCK_SCRIPTS } from './lock-scripts';
import {
  LINE_ENTRY_TTL_MS,
  lockScriptKeys,
  sharedScriptKeys,
  type LineEntry,
  type LineStatus,
  type LockAttempt,
  type LockExtension,
  type LockHandoff,
  type LockRejoin,
  type LockStore,
  acquireFlags,
  type WaitMode,
  RECHECK_MESSAGE,
} from './lock-store';

/**
 * Locks on one Redis (standalone, the master behind Sentinel, or a Cluster: every lock's keys
 * share a hash tag, so each script runs in one slot): fair lines with direct handoff, fences,
 * pub/sub wake-ups (sharded on Cluster).
 */
export class SingleNodeLockStore implements LockStore {
  readonly lines = true;

  private readonly fenceTtlMs: number;
  private readonly clockDriftFactor: number;

  constructor(private readonly connection: RedisLockConnection) {
    this.fenceTtlMs = connection.options.fenceTtlMs;
    this.clockDriftFactor = connection.options.clockDriftFactor;
  }

  /** The holder's `expiresAt` of a TTL of `ms` set by a command sent at `sentAt`. */
  deadline(sentAt: number, ms: number): number {
    return holderDeadline(sentAt, ms, this.clockDriftFactor);
  }

  check(keys: readonly LockRedisKeys[]): void {
    if (this.connection.isCluster) checkOneSlot(keys);
  }

  async attempt(
    keys: readonly LockRedisKeys[],
    token: string,
    o: ResolvedLockOptions,
    wait: WaitMode,
    onLate?: () => void,
  ): Promise<LockAttempt> {
    const sentAt = Date.now();
    const args: (string | number)[] = [
      token,
      o.ttlMs,
      acquireFlags(o.fencing, o.fair, wait),
      this.fenceTtlMs,
    ];
    // The entry's TTL only for a call that may join the line: each argument costs the server.
    if (wait === 'line') args.push(LINE_ENTRY_TTL_MS);
    // A granted reply's fences come as strings of digits (fence-counter.lua's nextFence).
    let reply: (number | string)[];
    // The attempt may still run later (e.g. from the client's offline queue after a reconnect)
    // and take the lock for a token nobody holds. A release queued behind it on the same
    // connection undoes exactly that, instead of leaving the key blocked for a whole TTL; and
    // once more when its late reply comes, in case Redis ran the two out of order (an attempt
    // answered NOSCRIPT after a reconnect is sent again after the release). Not for a line
    // token: it outlives the call, and a release may hand it the lock (its message given to a
    // caller) while this reply is late; only its owner knows, so it undoes (`onLate`).
    const undo =
      wait === 'line' ? undefined : () => void this.release(keys, token).catch(() => undefined);
    try {
      reply = (await this.connection.run(
        LOCK_SCRIPTS.acquire,
        lockScriptKeys(keys),
        args,
        undo ?? onLate,
      )) as (number | string)[];
    } catch (err) {
      undo?.();
      throw err;
    }
    // A lock found already ours comes with its PTTL: a handoff's TTL runs from the handoff, which
    // may be long before this call (found by a check after its message was lost).
    const pttl = reply[0] === 1 ? reply[2 + keys.length] : undefined;
    return reply[0] === 1
      ? {
          granted: true,
          redisNow: 0,
          sentAt,
          fences: reply.slice(2, 2 + keys.length).map(Number),
          wait: 0,
          expiresAt: this.deadline(
            sentAt,
            pttl === undefined ? o.ttlMs : Math.min(Math.max(0, Number(pttl)), o.ttlMs),
          ),
          others: reply[1] === 1,
        }
      : {
          granted: false,
          redisNow: Number(reply[1]),
          sentAt,
          fences: [],
          wait: Number(reply[2]),
          expiresAt: 0,
          lineLength: Number(reply[3]),
        };
  }

  async leaveLine(k: LockRedisKeys, token: string): Promise<LockAttempt> {
    const sentAt = Date.now();
    const reply = (await this.connection.run(LOCK_SCRIPTS.leaveLine, sharedScriptKeys(k), [
      token,
      this.connection.isCluster ? 1 : 0,
      this.fenceTtlMs,
    ])) as number[];
    return {
      granted: reply[0] === 1,
      redisNow: reply[1],
      sentAt,
      fences: reply.slice(2),
      wait: 0,
      expiresAt: sentAt,
    };
  }

  async release(keys: readonly LockRedisKeys[], token: string): Promise<boolean> {
    const released = await this.connection.run(LOCK_SCRIPTS.release, lockScriptKeys(keys), [
      token,
      this.connection.isCluster ? 1 : 0,
      this.fenceTtlMs,
    ]);
    return released === keys.length;
  }

  async handoff(
    k: LockRedisKeys,
    oldToken: string,
    newToken: string,
    o: ResolvedLockOptions,
  ): Promise<LockHandoff> {
    const sentAt = Date.now();
    const reply = (await this.connection.run(
      LOCK_SCRIPTS.handoff,
      [k.value, k.fence, k.line, k.entries],
      [oldToken, newToken, o.ttlMs, o.fencing ? 1 : 0, this.fenceTtlMs],
      // Answered late, the caller gave both tokens back (a release of each queued behind it);
      // once more for the new one, which nobody has, in case Redis ran them out of order.
      () => void this.release([k], newToken).catch(() => undefined),
    )) as (number | string)[];
    return { handed: reply[0] === 1, others: reply[1] === 1, fence: Number(reply[2] ?? 0), sentAt };
  }

  async rejoin(
    k: LockRedisKeys,
    token: string,
    entry: LineEntry,
    onLate?: () => void,
  ): Promise<LockRejoin> {
    const sentAt = Date.now();
    const [released, rejoined, fence, redisNow] = (await this.connection.run(
      LOCK_SCRIPTS.release,
      lockScriptKeys([k]),
      [
        token,
        this.connection.isCluster ? 1 : 0,
        this.fenceTtlMs,
        entry.token,
        entry.spec,
        LINE_ENTRY_TTL_MS,
      ],
      onLate,
    )) as [number, number, number | string, number];
    const outcome = rejoined === 2 ? 'granted' : rejoined === 1 ? 'line' : 'none';
    return { released: released === 1, outcome, fence: Number(fence), sentAt, redisNow };
  }

  async renew(entries: readonly LineEntry[]): Promise<LineStatus[]> {
    // One call per Cluster slot (a script's keys must share one); one call in all elsewhere.
    const groups = new Map<number, number[]>();
    entries.forEach((e, i) => {
      const slot = this.connection.isCluster ? clusterKeySlot(e.key.value) : 0;
      const group = groups.get(slot);
      if (group) group.push(i);
      else groups.set(slot, [i]);
    });
    const statuses: LineStatus[] = new Array(entries.length);
    await Promise.all(
      [...groups.values()].map(async (indexes) => {
        const keys: string[] = [];
        const args: (string | number)[] = [LINE_ENTRY_TTL_MS];
        for (const i of indexes) {
          const { key, token, spec } = entries[i];
          keys.push(key.value, key.fence, key.line, key.entries);
          args.push(token, spec);
        }
        const sentAt = Date.now();
        const reply = (await this.connection.run(LOCK_SCRIPTS.renew, keys, args)) as number[];
        indexes.forEach((i, j) => {
          const [state, fence, pttl] = reply.slice(j * 3, j * 3 + 3);
          statuses[i] =
            state === 2
              ? { state: 'handed', fence, expiresAt: this.deadline(sentAt, Math.max(0, pttl)) }
              : { state: state === 1 ? 'waiting' : state === 3 ? 'free' : 'gone' };
        });
      }),
    );
    return statuses;
  }

  async extend(
    keys: readonly LockRedisKeys[],
    token: string,
    ttlMs: number,
    waitForReplicas?: WaitForReplicasOptions,
  ): Promise<LockExtension> {
    const sentAt = Date.now();
    const values = keys.map((k) => k.value);
    if (!waitForReplicas) {
      const ok = await this.connection.run(LOCK_SCRIPTS.extend, values, [token, ttlMs]);
      return { held: ok === 1, expiresAt: this.deadline(sentAt, ttlMs) };
    }
    // The extension is a write (PEXPIRE), so WAIT right behind it on the same connection covers
    // the lock's value however it was granted: by our own SET or by a release handing it over.
    const [ok, acknowledged] = await this.connection.runThenWait(
      LOCK_SCRIPTS.extend,
      values,
      [token, ttlMs],
      waitForReplicas.replicas,
      waitForReplicas.timeoutMs,
    );
    return { held: ok === 1, expiresAt: this.deadline(sentAt, ttlMs), acknowledged };
  }

  async isHeld(keys: readonly LockRedisKeys[], token: string): Promise<boolean> {
    const values = await this.connection.call('lock MGET', (c) =>
      c.mget(...keys.map((k) => k.value)),
    );
    // A held value may carry the waiters' mark (see acquire.lua).
    return values.every((v) => v === token || v === `${token}*`);
  }

  async isLocked(key: LockRedisKeys): Promise<boolean> {
    return (await this.connection.call('lock EXISTS', (c) => c.exists(key.value))) === 1;
  }

  isSubscribed(channel: string): boolean {
    return this.connection.hub.isSubscribed(channel);
  }

  listen(channel: string, onMessage: (message: string) => void): Promise<() => void> {
    // Re-subscribed after a reconnect or failover: messages may have been lost, check again.
    return this.connection.hub.listen(channel, onMessage, () => onMessage(RECHECK_MESSAGE));
  }
}
