import { RedisLockError } from './redis-lock.error';
import { describeList } from './describe-value';

/**
 * `waitForReplicas`: fewer replicas than asked acknowledged a lock's write (Redis `WAIT`) within
 * the timeout, so the lock might not survive a failover. An acquisition that ends like this has
 * already released the lock again; an extension leaves it held on the master (the lock's
 * auto-extension retries, and aborts `lock.signal` if it still fails when the TTL runs out).
 */
export class LockReplicationError extends RedisLockError {
  /**
   * @param keys the lock keys (all of them; the message names the first few)
   * @param operation `'acquire'` or `'extend'`
   * @param acknowledged replicas that acknowledged the write
   * @param required replicas asked for (`waitForReplicas.replicas`)
   * @param timeoutMs how long `WAIT` waited (`waitForReplicas.timeoutMs`)
   */
  constructor(
    readonly keys: readonly string[],
    readonly operation: string,
    readonly acknowledged: number,
    readonly required: number,
    readonly timeoutMs: number,
  ) {
    super(
      `lock ${describeList(keys)}: ${operation} was acknowledged by ` +
        `${acknowledged} of ${required} required replicas within ${timeoutMs} ms` +
        (operation === 'acquire' ? '; the lock was released again' : ''),
    );
  }
}
