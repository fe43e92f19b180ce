import type { Redis } from 'ioredis';
import { bounded } from './bounded';

/** How often the replicas of the current master are counted again, in ms. */
export const REPLICA_CHECK_MS = 5_000;

/** A count that cannot be had stands for one replica, so locks keep waiting (fail safe). */
const orUnknown = (n: number | undefined): number => n ?? 1;

/** A Redis client's Sentinel options, when it was made with them (`options.sentinels`). */
export function isSentinelClient(client: unknown): boolean {
  const sentinels = (client as { options?: { sentinels?: unknown } }).options?.sentinels;
  return Array.isArray(sentinels) && sentinels.length > 0;
}

/** `connected_slaves` of an `INFO replication` answer (0 when absent, e.g. on a replica). */
export function connectedReplicas(info: string): number {
  const match = /^connected_slaves:(\d+)/m.exec(info);
  return match ? Number(match[1]) : 0;
}

/**
 * How many replicas the master behind a Sentinel client has, as far as locks need to know: for
 * each master term this client saw (a master's replication ID, `master_replid`, which a replica
 * gets anew when it is promoted), the most replicas it was ever seen with (`INFO replication`,
 * `connected_slaves`), counted at every connect and every `REPLICA_CHECK_MS` after.
 *
 * Never lowered within a term: a master cut off from its replicas (a split brain: the sentinels
 * promote a replica while clients still reach the old master) sees `connected_slaves` drop to 0,
 * exactly like a master whose replica crashed, and keeps its replication ID; it must keep waiting
 * for a replica then, so that its writes fail instead of granting a lock twice. A promoted replica
 * starts a new term, also when it is a node that was master before (a second failover back to
 * it): right after the promotion it has no replica (the old master is dead or not yet turned into
 * its replica), so locks do not wait and progress resumes at once; once a replica joins it, locks
 * wait for it again.
 *
 * A count that cannot be had (an ACL user without `INFO`, as on many managed services, or no
 * answer) leaves the number unknown, and unknown is treated as one replica: locks keep waiting,
 * as the default promises, instead of silently no longer waiting. On a master that really has
 * none, every acquisition then fails with `LockReplicationError` (loud); `waitForReplicas`
 * set explicitly (an object, or `false` to opt out) does not depend on the count at all.
 */
export class ReplicaWatch {
  /** Most replicas seen, by master term (`master_replid`). */
  private readonly seen = new Map<string, number>();
  /** The current master's term; `''` while (re)connecting or not counted yet. */
  private term = '';
  /**
   * Why the last count on this connection failed (unset once one succeeds, and on a new
   * connection): until the next periodic count, locks do not try again on every acquisition,
   * and the same failure is warned about once, not every `REPLICA_CHECK_MS`.
   */
  private failure?: string;
  private counting?: Promise<void>;
  private readonly timer: NodeJS.Timeout;

  /**
   * @param client the Sentinel client whose master is watched
   * @param commandTimeoutMs bound of each `INFO`
   * @param warn told when counting failed (the last count stays)
   */
  constructor(
    private readonly client: Redis,
    private readonly commandTimeoutMs: number,
    private readonly warn: (what: string, err: unknown) => void,
  ) {
    client.on('ready', this.onReady);
    client.on('close', this.onClose);
    if (client.status === 'ready') this.onReady();
    this.timer = setInterval(() => {
      if (client.status === 'ready' && !this.counting) this.counting = this.count();
    }, REPLICA_CHECK_MS);
    this.timer.unref();
  }

  /**
   * The replicas a lock must wait for now: the most ever seen on the current master (0: none,
   * do not wait). Answers at once once the current master was counted; while the client is
   * (re)connecting or the new master is being counted, waits for that count (bounded by
   * `commandTimeoutMs`), so that a lock sent to a newly promoted master never waits for replicas
   * it does not have, nor one sent to a master with replicas skips them. When the count cannot
   * be had (INFO refused, no answer), answers 1, as if a replica was counted (fail safe); the
   * count is tried again at the next periodic check or connection, not on every acquisition.
   */
  replicas(): number | Promise<number> {
    const n = this.counted();
    return n instanceof Promise ? n.then(orUnknown) : orUnknown(n);
  }

  /**
   * The most replicas seen on the current master, as `replicas()` waits for it, but undefined
   * when the count cannot be had (for callers that must not guess, e.g. the queue's check that a
   * master has the replicas a write asks for).
   */
  counted(): number | undefined | Promise<number | undefined> {
    const known = this.current();
    if (known !== undefined) return known;
    if (this.failure !== undefined && !this.counting) return undefined;
    return (this.counting ??= this.count()).then(() => this.current());
  }

  /** Stops the periodic count. */
  close(): void {
    clearInterval(this.timer);
    this.client.off('ready', this.onReady);
    this.client.off('close', this.onClose);
  }

  /** The most replicas seen on the current master; undefined while it is not counted. */
  private current(): number | undefined {
    return this.term === '' ? undefined : this.seen.get(this.term);
  }

  private readonly onReady = (): void => {
    this.term = '';
    this.counting = this.count();
  };

  /** The connection is gone: the next master is unknown until it is connected and counted. */
  private readonly onClose = (): void => {
    this.term = '';
    this.failure = undefined;
  };

  private async count(): Promise<void> {
    try {
      if (this.client.status !== 'ready') {
        // The listener goes with the wait, also when the wait times out: a long outage must not
        // pile up one listener per count.
        let onReady: (() => void) | undefined;
        try {
          await bounded(
            'Sentinel master connection',
            new Promise<void>((resolve) => this.client.once('ready', (onReady = resolve))),
            this.commandTimeoutMs,
          );
        } finally {
          if (onReady) this.client.off('ready', onReady);
        }
      }
      const info = await bounded(
        'INFO replication',
        this.client.info('replication'),
        this.commandTimeoutMs,
      );
      const term = /^master_replid:(\w+)/m.exec(info)?.[1] ?? '?';
      const n = connectedReplicas(info);
      this.seen.set(term, Math.max(n, this.seen.get(term) ?? 0));
      this.term = term;
      this.failure = undefined;
    } catch (err) {
      const failure = (err as Error).message;
      if (failure !== this.failure) {
        this.warn(
          'counting the replicas of the Sentinel master failed; locks wait for 1 replica as if ' +
            'one was counted (allow the ACL user INFO, or set waitForReplicas; docs/redis-setup.md)',
          err,
        );
      }
      this.failure = failure;
    } finally {
      this.counting = undefined;
    }
  }
}
