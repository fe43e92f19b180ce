import { RedisLockError } from '../errors/redis-lock.error';
import { RedisCommandError } from '../errors/redis-command.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';

const CONNECTION_FAILURE =
  /Connection is closed|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|Stream isn't writeable|enableOfflineQueue|max retries per request|MaxRetriesPerRequest|CLUSTERDOWN|TRYAGAIN|LOADING|READONLY|MASTERDOWN|Failed to refresh slots cache|None of startup nodes|Too many Cluster redirections/i;

/** Turns whatever a Redis call rejected with into a typed error of this library. */
export function toRedisError(operation: string, err: unknown): RedisLockError {
  if (err instanceof RedisLockError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const name = err instanceof Error ? err.name : '';
  return CONNECTION_FAILURE.test(message) || CONNECTION_FAILURE.test(name)
    ? new RedisUnavailableError(operation, message, { cause: err })
    : new RedisCommandError(operation, message, { cause: err });
}

/**
 * Awaits a Redis call for at most `ms`: rejects with `RedisUnavailableError` when it takes longer
 * and maps Redis errors to typed errors. The command itself is not cancelled (Redis has no way to),
 * so anything it may still do must be safe by TTL.
 */
export function bounded<T>(operation: string, call: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new RedisUnavailableError(operation, `no answer within ${ms} ms`)),
      ms,
    );
    call.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(toRedisError(operation, err));
      },
    );
  });
}
