import { clusterKeySlot } from '../redis/cluster-slot';
import type { RedisLockConnection } from '../redis/redis-connection';
import { LINE_ENTRY_TTL_MS } from '../lock/lock-store';
import { semaphoreScriptKeys, type SemaphoreRedisKeys } from './semaphore-keys';
import type { ResolvedSemaphoreOptions } from './semaphore-options';
import { SEMAPHORE_SCRIPTS } from './semaphore-scripts';
import { holderDeadline } from '../waiting/grant-deadline';

/** The outcome of one acquisition attempt. */
export type SemaphoreAttempt =
  | { granted: true; fence: number; expiresAt: number; sentAt: number }
  | { granted: false; redisNow: number; soonestMs: number; sentAt: number }
  | { granted: false; storedLimit: number; sentAt: number };

/** A waiting caller's place in a semaphore's line, renewed by its process (`renew.lua`). */
export interface PermitEntry {
  key: SemaphoreRedisKeys;
  token: string;
  /** `ttlMs:permits` of the entry. */
  spec: string;
}

/** What the renewal found for one entry. */
export type PermitEntryStatus =
  { state: 'waiting' } | { state: 'gone' } | { state: 'granted'; fence: number; expiresAt: number };

/** The `ttlMs:permits` part of a line entry. */
export function permitSpec(o: ResolvedSemaphoreOptions): string {
  return `${o.ttlMs}:${o.permits}`;
}

/** Semaphores on one Redis (standalone, Sentinel's master or a Cluster): one script per call. */
export class SemaphoreStore {
  constructor(private readonly connection: RedisLockConnection) {}

  /**
   * The holder's `expiresAt` of permits Redis keeps for `ms` after a command sent at `sentAt`
   * (less the clock-drift allowance, lib/waiting/grant-deadline.ts).
   */
  deadline(sentAt: number, ms: number): number {
    return holderDeadline(sentAt, ms, this.connection.options.clockDriftFactor);
  }

  private get sharded(): number {
    return this.connection.isCluster ? 1 : 0;
  }

  /**
   * One acquisition attempt of `token`: granted, or (with `wait`) in line.
   * @param fresh `token` is new and known only to this call (a caller's first attempt): when the
   *   call fails or answers after its bound, the token leaves the line, giving back what it was
   *   granted. Not for a waiter's token: a grant message may have given its permits to the caller.
   * @param onLate not `fresh`: called when the reply comes after the bound (see `bounded`); only
   *   the waiter's line knows whether its caller gave the token up meanwhile
   */
  async acquire(
    k: SemaphoreRedisKeys,
    token: string,
    o: ResolvedSemaphoreOptions,
    wait: boolean,
    fresh = false,
    onLate?: () => void,
  ): Promise<SemaphoreAttempt> {
    const sentAt = Date.now();
    // The attempt may still run later (once a stall ends, or from the client's offline queue after
    // a reconnect) and grant permits, or a place in line, to a token nobody has: the permits would
    // be held for their whole TTL. Leaving the line, queued behind it on the same connection, undoes
    // exactly that; and once more when its late reply comes, in case Redis ran the two out of order
    // (an attempt answered NOSCRIPT is sent again after what was sent behind it).
    const undo = fresh ? () => void this.leaveLine(k, token).catch(() => undefined) : undefined;
    let reply: number[];
    try {
      reply = (await this.connection.run(
        SEMAPHORE_SCRIPTS.acquire,
        semaphoreScriptKeys(k),
        [token, o.permits, o.limit, o.ttlMs, wait ? 1 : 0, LINE_ENTRY_TTL_MS, this.sharded],
        undo ?? onLate,
      )) as number[];
    } catch (err) {
      undo?.();
      throw err;
    }
    if (reply[0] === 1) {
      return { granted: true, fence: reply[1], expiresAt: this.deadline(sentAt, reply[2]), sentAt };
    }
    if (reply[0] === -1) return { granted: false, storedLimit: reply[1], sentAt };
    return { granted: false, redisNow: reply[1], soonestMs: reply[2], sentAt };
  }

  /** Releases the permits of `token`; `true` when it held them. */
  async release(k: SemaphoreRedisKeys, token: string): Promise<boolean> {
    const released = await this.connection.run(SEMAPHORE_SCRIPTS.release, semaphoreScriptKeys(k), [
      token,
      this.sharded,
      LINE_ENTRY_TTL_MS,
    ]);
    return released === 1;
  }

  /** Leaves the line, giving back permits handed to `token` meanwhile. */
  async leaveLine(k: SemaphoreRedisKeys, token: string): Promise<void> {
    await this.connection.run(SEMAPHORE_SCRIPTS.leaveLine, semaphoreScriptKeys(k), [
      token,
      this.sharded,
      LINE_ENTRY_TTL_MS,
    ]);
  }

  /** Sets the remaining TTL of `token`'s permits; `false` when they are gone. */
  async extend(k: SemaphoreRedisKeys, token: string, ttlMs: number): Promise<boolean> {
    const ok = await this.connection.run(SEMAPHORE_SCRIPTS.extend, semaphoreScriptKeys(k), [
      token,
      ttlMs,
      LINE_ENTRY_TTL_MS,
    ]);
    return ok === 1;
  }

  async isHeld(k: SemaphoreRedisKeys, token: string): Promise<boolean> {
    return (
      (await this.connection.run(SEMAPHORE_SCRIPTS.isHeld, semaphoreScriptKeys(k), [token])) === 1
    );
  }

  /** Renews line entries of this process, one call per Cluster slot; statuses in input order. */
  async renew(entries: readonly PermitEntry[]): Promise<PermitEntryStatus[]> {
    const groups = new Map<number, number[]>();
    entries.forEach((e, i) => {
      const slot = this.connection.isCluster ? clusterKeySlot(e.key.holders) : 0;
      const group = groups.get(slot);
      if (group) group.push(i);
      else groups.set(slot, [i]);
    });
    const statuses: PermitEntryStatus[] = new Array(entries.length);
    await Promise.all(
      [...groups.values()].map(async (indexes) => {
        const keys: string[] = [];
        const args: (string | number)[] = [LINE_ENTRY_TTL_MS, this.sharded];
        for (const i of indexes) {
          keys.push(...semaphoreScriptKeys(entries[i].key));
          args.push(entries[i].token, entries[i].spec);
        }
        const sentAt = Date.now();
        const reply = (await this.connection.run(SEMAPHORE_SCRIPTS.renew, keys, args)) as number[];
        indexes.forEach((i, j) => {
          const [state, fence, remaining] = reply.slice(j * 3, j * 3 + 3);
          statuses[i] =
            state === 2
              ? { state: 'granted', fence, expiresAt: this.deadline(sentAt, remaining) }
              : { state: state === 1 ? 'waiting' : 'gone' };
        });
      }),
    );
    return statuses;
  }

  listen(channel: string, onMessage: (message: string) => void): Promise<() => void> {
    return this.connection.hub.listen(channel, onMessage);
  }
}
