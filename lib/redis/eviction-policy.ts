import type { Redis } from 'ioredis';
import { bounded } from './bounded';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';

/** The only `maxmemory-policy` under which Redis never deletes a lock or queue key on its own. */
export const SAFE_EVICTION_POLICY = 'noeviction';

/** The fix named by the warning and the error of a master that may evict keys. */
export const EVICTION_POLICY_FIX =
  "set maxmemory-policy to noeviction (CONFIG SET maxmemory-policy noeviction and in redis.conf, or the managed service's parameter group), or give the module a Redis of its own (docs/redis-setup.md)";

/** One master's `maxmemory-policy` as read at boot. */
export type EvictionPolicyReading =
  /** Read with `CONFIG GET`, or from `INFO memory` where `CONFIG` was refused. */
  | { policy: string; via: 'CONFIG GET' | 'INFO memory' }
  /** Neither command was allowed (or answered): why, per command. */
  | { policy?: undefined; why: string };

/**
 * Reads `maxmemory-policy` of one master: `CONFIG GET maxmemory-policy`, or where `CONFIG` is
 * refused or renamed (managed Redis, an ACL user without `+config`), `INFO memory`'s
 * `maxmemory_policy`. Each call bounded by `ms`; a master that does not answer in time is not
 * asked again (the check must not hold up the start).
 */
export async function readEvictionPolicy(node: Redis, ms: number): Promise<EvictionPolicyReading> {
  let configFailure: string;
  try {
    const reply = await bounded(
      'CONFIG GET maxmemory-policy',
      node.call('CONFIG', 'GET', 'maxmemory-policy') as Promise<unknown>,
      ms,
    );
    const policy = Array.isArray(reply) ? reply[1] : undefined;
    if (typeof policy === 'string' && policy) return { policy, via: 'CONFIG GET' };
    configFailure = 'CONFIG GET answered without maxmemory-policy';
  } catch (err) {
    configFailure = (err as Error).message;
    if (err instanceof RedisUnavailableError) return { why: configFailure };
  }
  try {
    const info = await bounded('INFO memory', node.info('memory'), ms);
    const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
    if (policy) return { policy, via: 'INFO memory' };
    return { why: `${configFailure}; INFO memory has no maxmemory_policy` };
  } catch (err) {
    return { why: `${configFailure}; ${(err as Error).message}` };
  }
}

/** The boot warning of a master whose policy lets Redis evict the module's keys. */
export function evictionWarning(master: string, policy: string): string {
  return (
    `Redis master ${master} has maxmemory-policy '${policy}': when it reaches maxmemory it ` +
    'evicts keys, so a held lock can be granted a second time (the first holder is not told) ' +
    `and queued tasks can vanish. Fix: ${EVICTION_POLICY_FIX}. ` +
    "Module option evictionPolicy: 'fail' makes this fatal at boot."
  );
}

/** The boot warning of a master whose policy could not be read. */
export function uncheckedWarning(master: string, why: string): string {
  return (
    `maxmemory-policy of Redis master ${master} could not be checked (${why}): if it is not ` +
    `noeviction, Redis can evict lock and queue keys. Make sure it is noeviction, or allow the ` +
    'user CONFIG GET or INFO (docs/redis-setup.md).'
  );
}
