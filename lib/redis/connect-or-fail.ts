import { checkDistinctServers } from '../lock/quorum-lock-store';
import type { RedisLockConnection } from './redis-connection';

/** Bound of the boot checks (Cluster node, eviction policy) without `connectTimeoutMs`, in ms. */
const BOOT_CHECK_MS = 1_000;

/**
 * With `connectTimeoutMs`: PINGs Redis before anything of the module starts, and on no answer in
 * time closes the connections and fails the start with `RedisUnavailableError`. Always: fails the
 * start with `RedisLockOptionsError` when a single-node connection reaches a Redis Cluster node,
 * and checks every master's `maxmemory-policy` (`evictionPolicy`: a warning per master, or with
 * `'fail'` `RedisLockOptionsError`), and fails it with `RedisLockOptionsError` for a database index
 * Redis refuses (`checkDatabase`) and for quorum nodes that are one server (`checkDistinctServers`).
 * The checks run side by side, each call bounded by `connectTimeoutMs` (else 1 s) and
 * `commandTimeoutMs`; no answer is no verdict.
 */
export async function connectOrFail(connection: RedisLockConnection): Promise<RedisLockConnection> {
  const { connectTimeoutMs: ms, commandTimeoutMs, evictionPolicy } = connection.options;
  try {
    if (ms !== undefined) {
      // Connected first: with `enableOfflineQueue: false` a PING sent while the client connects
      // is refused at once, although Redis is up. (A refusal, such as a wrong password, ends the
      // wait at once: the PING then reports it.)
      const started = Date.now();
      await connection.reached(ms);
      const left = Math.max(1, ms - (Date.now() - started));
      await connection.call('PING (connectTimeoutMs)', (c) => c.ping(), left);
    }
    const bound = Math.min(ms ?? BOOT_CHECK_MS, commandTimeoutMs);
    const checks = await Promise.allSettled([
      connection.checkNotClusterNode(bound),
      connection.checkEvictionPolicy(bound, evictionPolicy),
      connection.checkDatabase(bound),
      checkDistinctServers(connection.nodes, bound),
    ]);
    for (const check of checks) if (check.status === 'rejected') throw check.reason;
  } catch (err) {
    await connection.close().catch(() => undefined);
    throw err;
  }
  return connection;
}
