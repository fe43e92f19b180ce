import { Injectable } from '@nestjs/common';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { RedisLockConnection } from '../redis/redis-connection';
import { checkResourceName, checkWriter, fencedRedisKey } from './fenced-keys';
import { FENCED_SCRIPTS } from './fenced-scripts';
import type { FencedValue } from './interfaces/fenced-value.interface';
import type { FencedWriter } from './interfaces/fenced-writer.interface';

/**
 * A resource in Redis that refuses writes from an older lock holder: each write carries the
 * writer's fencing token (`lock.fence`), and a write whose fence is lower than the highest fence
 * the resource has seen is refused, atomically (one Lua compare-and-set).
 *
 * This closes the gap a lock alone cannot: a holder that froze past its TTL (GC pause, SIGSTOP,
 * a slow disk) still believes it holds the lock when it resumes; by then a newer holder got a
 * higher fence and wrote with it, so the stale write is refused instead of overwriting newer data.
 *
 * Pass the lock itself (`write(resource, lock, value)`): the resource then also remembers the
 * writer's token, and a write with the same fence is accepted only from that token. Two holders
 * can only share a fence when something went wrong upstream (a failover that lost the fence
 * counter's last increments; see docs/locks.md, "Fences"): then the first to write wins and the
 * other is refused, instead of both writing. A bare fence (`write(resource, lock.fence, value)`)
 * is the anonymous writer: an equal fence is accepted from it only where the last write was also
 * anonymous, as before tokens were remembered.
 *
 * One hash per resource (`<keyPrefix>fenced:{<resource>}`, the name encoded like a lock name),
 * fields `fence`, `value` and `token`; the keys never expire. A resource named like its lock
 * (`'{order:42}'`) shares the lock's Cluster slot. Every call is bounded by `commandTimeoutMs`
 * (`RedisUnavailableError`).
 * @example
 * ```ts
 * await locks.withLock('stock:42', async (lock) => {
 *   const stock = await fenced.read('stock:42');
 *   const next = String(Number(stock?.value ?? 10) - 1);
 *   if (!(await fenced.write('stock:42', lock, next))) {
 *     throw new Error('lost the lock to another holder; nothing was written');
 *   }
 * });
 * ```
 */
@Injectable()
export class FencedStore {
  constructor(private readonly connection: RedisLockConnection) {}

  /**
   * Stores `value` in `resource` unless the resource has already seen a higher fence, or the same
   * fence from another writer.
   * @param resource the resource name (a non-empty string of at most 512 bytes)
   * @param writer the writer: a `Lock` (or a `Permit`, or `{ fence, token }`), so that an equal
   *   fence is accepted only from the same token; or a bare fence (`lock.fence`, a positive safe
   *   integer), accepted with an equal fence only where the last write also gave a bare fence
   * @param value the value to store
   * @returns `true` when written, `false` when refused because a newer holder (or another holder
   *   with the same fence) already wrote
   * @throws LockKeyError for an invalid resource name
   * @throws RedisLockOptionsError for a fence that is not a positive safe integer (a lock taken
   *   with `fencing: false` has fence `0`), a token that is not a non-empty string, or a value
   *   that is not a string
   * @example
   * await fenced.write('stock:42', lock, '9');
   */
  async write(resource: string, writer: FencedWriter | number, value: string): Promise<boolean> {
    const key = this.key(resource);
    const { fence, token } = checkWriter(writer);
    if (typeof value !== 'string') throw new RedisLockOptionsError('value', value, 'a string');
    const reply = (await this.connection.run(
      FENCED_SCRIPTS.write,
      [key],
      [fence, value, token],
    )) as number[];
    return reply[0] === 1;
  }

  /**
   * Reads the last accepted value of `resource`, the fence it was written with and its writer's
   * token (when it gave one), or `null` when nothing was ever written.
   * @throws LockKeyError for an invalid resource name
   */
  async read(resource: string): Promise<FencedValue | null> {
    const key = this.key(resource);
    const [fence, value, token] = await this.connection.call('fenced HMGET', (c) =>
      c.hmget(key, 'fence', 'value', 'token'),
    );
    if (fence === null || value === null) return null;
    return token === null
      ? { value, fence: Number(fence) }
      : { value, fence: Number(fence), token };
  }

  /**
   * Whether a write by `writer` would be accepted now (by the rules of `write`). Only a hint for
   * skipping work early: the answer can change the moment after; `write` checks again atomically.
   * @param writer as for `write`: a `Lock` (or `{ fence, token }`), or a bare fence
   * @throws LockKeyError for an invalid resource name
   * @throws RedisLockOptionsError for a fence that is not a positive safe integer, or a token
   *   that is not a non-empty string
   */
  async check(resource: string, writer: FencedWriter | number): Promise<boolean> {
    const key = this.key(resource);
    const { fence, token } = checkWriter(writer);
    const [highest, by] = await this.connection.call('fenced HMGET', (c) =>
      c.hmget(key, 'fence', 'token'),
    );
    if (highest === null) return true;
    const seen = Number(highest);
    return fence > seen || (fence === seen && (by ?? '') === token);
  }

  private key(resource: unknown): string {
    return fencedRedisKey(this.connection.options.keyPrefix, checkResourceName(resource));
  }
}
