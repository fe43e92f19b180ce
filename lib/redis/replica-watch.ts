import type { Redis } from 'ioredis';
import { bounded } from './bounded';

/** How often the replicas of the current master are counted again, in ms. */
export const REPLICA_CHECK_MS = 5_000;

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
 */
export class ReplicaWatch {
  /** Most replicas seen, by master term (`master_replid`). */
  private readonly seen = new Map<string, number>();
  /** The current master's term; `''` while (re)connecting or not counted yet. */
  private term = '';
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
   * be had, answers 1 if any master of this client ever had a replica (fail safe), else 0.
   */
  replicas(): number | Promise<number> {
    const known = this.term === '' ? undefined : this.seen.get(this.term);
    if (known !== undefined) return known;
    return (this.counting ??= this.count()).then(() => {
      const n = this.term === '' ? undefined : this.seen.get(this.term);
      return n ?? ([...this.seen.values()].some((v) => v > 0) ? 1 : 0);
    });
  }

  /** Stops the periodic count. */
  close(): void {
    clearInterval(this.timer);
    this.client.off('ready', this.onReady);
    this.client.off('close', this.onClose);
  }

  private readonly onReady = (): void => {
    this.term = '';
    this.counting = this.count();
  };

  /** The connection is gone: the next master is unknown until it is connected and counted. */
  private readonly onClose = (): void => {
    this.term = '';
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
    } catch (err) {
      this.warn('counting the replicas of the Sentinel master failed', err);
    } finally {
      this.counting = undefined;
    }
  }
}
