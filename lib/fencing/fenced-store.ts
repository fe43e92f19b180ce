import { Injectable } from '@nestjs/common';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { RedisLockConnection } from '../redis/redis-connection';
import { checkFence, checkResourceName, fencedRedisKey } from './fenced-keys';
import { FENCED_SCRIPTS } from './fenced-scripts';
import type { FencedValue } from './interfaces/fenced-value.interface';

/**
 * A resource in Redis that refuses writes from an older lock holder: each write carries the
 * writer's fencing token (`lock.fence`), and a write whose fence is lower than the highest fence
 * the resource has seen is refused, atomically (one Lua compare-and-set).
 *
 * This closes the gap a lock alone cannot: a holder that froze past its TTL (GC pause, SIGSTOP,
 * a slow disk) still believes it holds the lock when it resumes; by then a newer holder got a
 * higher fence and wrote with it, so the stale write is refused instead of overwriting newer data.
 *
 * One hash per resource (`<keyPrefix>fenced:{<resource>}`, fields `fence` and `value`); the keys
 * never expire. A resource named like its lock (`'{order:42}'`) shares the lock's Cluster slot.
 * Every call is bounded by `commandTimeoutMs` (`RedisUnavailableError`).
 * @example
 * ```ts
 * await locks.withLock('stock:42', async (lock) => {
 *   const stock = await fenced.read('stock:42');
 *   const next = String(Number(stock?.value ?? 10) - 1);
 *   if (!(await fenced.write('stock:42', lock.fence, next))) {
 *     throw new Error('lost the lock to a newer holder; nothing was written');
 *   }
 * });
 * ```
 */
@Injectable()
export class FencedStore {
  constructor(private readonly connection: RedisLockConnection) {}

  /**
   * Stores `value` in `resource` unless the resource has already seen a higher fence.
   * A fence equal to the highest seen is accepted (the same holder writing again).
   * @param resource the resource name (a non-empty string of at most 512 bytes)
   * @param fence the writer's fencing token, e.g. `lock.fence` (a positive safe integer)
   * @param value the value to store
   * @returns `true` when written, `false` when refused because a newer holder already wrote
   * @throws LockKeyError for an invalid resource name
   * @throws RedisLockOptionsError for a fence that is not a positive safe integer (a lock taken
   *   with `fencing: false` has fence `0`), or a value that is not a string
   */
  async write(resource: string, fence: number, value: string): Promise<boolean> {
    const key = this.key(resource);
    const f = checkFence(fence);
    if (typeof value !== 'string') throw new RedisLockOptionsError('value', value, 'a string');
    const reply = (await this.connection.run(FENCED_SCRIPTS.write, [key], [f, value])) as number[];
    return reply[0] === 1;
  }

  /**
   * Reads the last accepted value of `resource` and the fence it was written with, or `null`
   * when nothing was ever written.
   * @throws LockKeyError for an invalid resource name
   */
  async read(resource: string): Promise<FencedValue | null> {
    const key = this.key(resource);
    const [fence, value] = await this.connection.call('fenced HMGET', (c) =>
      c.hmget(key, 'fence', 'value'),
    );
    return fence === null || value === null ? null : { value, fence: Number(fence) };
  }

  /**
   * Whether a write with `fence` would be accepted now (it is not lower than the highest fence
   * `resource` has seen). Only a hint for skipping work early: the answer can change the moment
   * after; `write` checks again atomically.
   * @throws LockKeyError for an invalid resource name
   * @throws RedisLockOptionsError for a fence that is not a positive safe integer
   */
  async check(resource: string, fence: number): Promise<boolean> {
    const key = this.key(resource);
    const f = checkFence(fence);
    const highest = await this.connection.call('fenced HGET', (c) => c.hget(key, 'fence'));
    return highest === null || f >= Number(highest);
  }

  private key(resource: unknown): string {
    return fencedRedisKey(this.connection.options.keyPrefix, checkResourceName(resource));
  }
}
