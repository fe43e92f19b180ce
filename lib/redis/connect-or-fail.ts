import type { RedisLockConnection } from './redis-connection';

/** Bound of the boot check for a Cluster node without `connectTimeoutMs`, in ms. */
const CLUSTER_NODE_CHECK_MS = 1_000;

/**
 * With `connectTimeoutMs`: PINGs Redis before anything of the module starts, and on no answer in
 * time closes the connections and fails the start with `RedisUnavailableError`. Always: fails the
 * start with `RedisLockOptionsError` when a single-node connection reaches a Redis Cluster node
 * (checked within `connectTimeoutMs`, else 1 s; no answer is no verdict).
 */
export async function connectOrFail(connection: RedisLockConnection): Promise<RedisLockConnection> {
  const ms = connection.options.connectTimeoutMs;
  try {
    if (ms !== undefined) await connection.call('PING (connectTimeoutMs)', (c) => c.ping(), ms);
    await connection.checkNotClusterNode(
      Math.min(ms ?? CLUSTER_NODE_CHECK_MS, connection.options.commandTimeoutMs),
    );
  } catch (err) {
    await connection.close().catch(() => undefined);
    throw err;
  }
  return connection;
}
