import { RedisLockError } from './redis-lock.error';
import { describeList } from './describe-value';

/**
 * Quorum mode (`nodes`): a lock operation could not be decided because fewer Redis nodes than a
 * majority answered (the others were down or too slow). Distinct from `LockTimeoutError`, which
 * means the nodes answered and another owner holds the lock.
 */
export class LockQuorumError extends RedisLockError {
  /**
   * @param keys the lock keys (all of them; the message names the first few)
   * @param operation what was attempted: `'acquire'`, `'release'`, `'extend'`, `'isHeld'`, `'isLocked'`
   * @param nodes how many nodes the module uses
   * @param answered how many of them answered the last attempt
   * @param granted how many of those granted it (acquire/extend/release succeeded on that node)
   * @param needed the quorum: `floor(nodes / 2) + 1`
   * @param waitedMs for an acquisition, how long it waited in ms
   */
  constructor(
    readonly keys: readonly string[],
    readonly operation: string,
    readonly nodes: number,
    readonly answered: number,
    readonly granted: number,
    readonly needed: number,
    readonly waitedMs?: number,
  ) {
    super(
      `lock ${describeList(keys)}: ${operation} ` +
        (waitedMs === undefined ? 'failed' : `failed within ${waitedMs} ms`) +
        `: only ${answered} of ${nodes} Redis nodes answered (${granted} granted); ` +
        `a quorum needs ${needed}`,
    );
  }
}
