/** ioredis reply prefixes that mean the cluster is moving or failing over, not a bad command. */
const REDIS_REPLIES =
  /^(MOVED|ASK|CLUSTERDOWN|TRYAGAIN|LOADING|READONLY|MASTERDOWN|NOREPLICAS|BUSY)\b/;
/** ioredis client errors of a connection in trouble. */
const REDIS_CLIENT =
  /Command timed out|Connection is closed|Stream isn't writeable|Reached the max retries per request limit|Failed to refresh slots cache|Too many Cluster redirections|None of startup nodes is available|Cluster isn't ready/;
/** Network error codes (Node) and PostgreSQL SQLSTATEs of a server out of reach or restarting. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH']);
const POSTGRES_STATES = /^(08|57P0)/;
const POSTGRES_CLIENT =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error/;

/**
 * Which backend an error says is out of reach (`'Redis'`, `'the database'`), or `undefined` for
 * any other error (a bug: 500). The HTTP layer answers an outage with 503 + `Retry-After`: during a
 * Redis failover (MOVED storms, `CLUSTERDOWN`, timeouts) or a database restart the buyer retries.
 * @example
 * outageOf(new Error('Command timed out')) // 'Redis'
 */
export function outageOf(err: unknown): 'Redis' | 'the database' | undefined {
  // Duck-typed, not `instanceof Error`: errors made by Node's own modules come from another realm
  // under test runners that sandbox globals.
  if (typeof err !== 'object' || err === null) return undefined;
  const { name, message, code, errors } = err as {
    name?: unknown;
    message?: unknown;
    code?: unknown;
    errors?: unknown;
  };
  if (typeof message !== 'string') return undefined;
  if (name === 'ReplyError' && REDIS_REPLIES.test(message)) return 'Redis';
  if (name === 'MaxRetriesPerRequestError' || name === 'ClusterAllFailedError') return 'Redis';
  // The sample's own `ReplicaLagError`, the library's `QueueReplicationError` (a failover could
  // lose the write), `RedisUnavailableError`, and `LockLostError` (Redis stalled past the lock's
  // TTL: the batch wrote nothing).
  if (
    typeof name === 'string' &&
    /(Replication|ReplicaLag|RedisUnavailable|LockLost)Error$/.test(name)
  ) {
    return 'Redis';
  }
  if (REDIS_CLIENT.test(message)) return 'Redis';
  if (typeof code === 'string' && POSTGRES_STATES.test(code)) return 'the database';
  if (POSTGRES_CLIENT.test(message)) return 'the database';
  // A refused or broken socket: the database's pool reports these (ioredis reports its own above).
  if (typeof code === 'string' && NETWORK_CODES.has(code)) return 'the database';
  if (Array.isArray(errors)) return errors.map(outageOf).find(Boolean);
  return undefined;
}
