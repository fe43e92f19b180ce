import type { WaitForReplicasOptions } from '../interfaces/lock-options.interface';
import type { ResolvedLockOptions } from '../options/resolve-options';
import type { RedisLockConnection } from '../redis/redis-connection';
import { checkOneSlot, type LockRedisKeys } from './lock-keys';
import { LOCK_SCRIPTS } from './lock-scripts';
import {
  acquireKeys,
  lineEntryTtl,
  releaseKeys,
  type LockAttempt,
  type LockExtension,
  type LockStore,
} from './lock-store';

/**
 * Locks on one Redis (standalone, the master behind Sentinel, or a Cluster: every lock's keys
 * share a hash tag, so each script runs in one slot): fair lines with direct handoff, fences,
 * pub/sub wake-ups (sharded on Cluster).
 */
export class SingleNodeLockStore implements LockStore {
  readonly lines = true;

  constructor(private readonly connection: RedisLockConnection) {}

  check(keys: readonly LockRedisKeys[]): void {
    if (this.connection.isCluster) checkOneSlot(keys);
  }

  async attempt(
    keys: readonly LockRedisKeys[],
    token: string,
    o: ResolvedLockOptions,
    join: boolean,
  ): Promise<LockAttempt> {
    const sentAt = Date.now();
    let reply: number[];
    try {
      reply = (await this.connection.run(LOCK_SCRIPTS.acquire, acquireKeys(keys), [
        token,
        o.ttlMs,
        o.fencing ? 1 : 0,
        o.fair ? 1 : 0,
        join ? 1 : 0,
        lineEntryTtl(o),
      ])) as number[];
    } catch (err) {
      // The attempt may still run later (e.g. from the client's offline queue after a reconnect)
      // and take the lock for a token nobody holds. A release queued behind it on the same
      // connection undoes exactly that, instead of leaving the key blocked for a whole TTL.
      this.release(keys, token).catch(() => undefined);
      throw err;
    }
    return reply[0] === 1
      ? {
          granted: true,
          redisNow: reply[1],
          sentAt,
          fences: reply.slice(2),
          wait: 0,
          expiresAt: sentAt + o.ttlMs,
        }
      : {
          granted: false,
          redisNow: reply[1],
          sentAt,
          fences: [],
          wait: reply[2],
          expiresAt: 0,
        };
  }

  async leaveLine(k: LockRedisKeys, token: string): Promise<LockAttempt> {
    const sentAt = Date.now();
    const reply = (await this.connection.run(
      LOCK_SCRIPTS.leaveLine,
      [k.value, k.fence, k.line, k.entries],
      [token],
    )) as number[];
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
    const released = await this.connection.run(LOCK_SCRIPTS.release, releaseKeys(keys), [
      token,
      this.connection.isCluster ? 1 : 0,
    ]);
    return released === keys.length;
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
      return { held: ok === 1, expiresAt: sentAt + ttlMs };
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
    return { held: ok === 1, expiresAt: sentAt + ttlMs, acknowledged };
  }

  async isHeld(keys: readonly LockRedisKeys[], token: string): Promise<boolean> {
    const values = await this.connection.call('lock MGET', (c) =>
      c.mget(...keys.map((k) => k.value)),
    );
    return values.every((v) => v === token);
  }

  async isLocked(key: LockRedisKeys): Promise<boolean> {
    return (await this.connection.call('lock EXISTS', (c) => c.exists(key.value))) === 1;
  }

  listen(channel: string, onMessage: (message: string) => void): Promise<() => void> {
    return this.connection.hub.listen(channel, onMessage);
  }
}
