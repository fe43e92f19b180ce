/** One instance waiting in a lock's line (see `LockService.inspect`). */
export interface LockLineEntry {
  /** The `instanceId` of the waiting instance; absent when its owner record is gone. */
  readonly owner?: string;
  /** When the entry joined the line (epoch ms, by the waiting instance's clock). */
  readonly since: number;
  /**
   * `'handoff'`: a fair waiter, handed the lock directly on release; `'wake'`: a `fair: false`
   * waiter, only woken to try again.
   */
  readonly mode: 'handoff' | 'wake';
}

/** What `LockService.inspect` shows of one lock. */
export interface LockInspection {
  /** The lock name, as given. */
  readonly key: string;
  /** Whether anyone holds the lock. */
  readonly held: boolean;
  /**
   * When held exclusively: the `instanceId` of the holder; absent when unknown (its owner record
   * is gone) or when the lock is held in shared mode (see `sharedHolders`).
   */
  readonly owner?: string;
  /**
   * When held in shared mode (`mode: 'shared'`): the live shared holders (at most 100), each with
   * its instance's `instanceId` (absent when unknown) and when it asked (epoch ms, its clock).
   */
  readonly sharedHolders?: readonly { readonly owner?: string; readonly since: number }[];
  /** When held: the lock's remaining TTL in ms. */
  readonly ttlMs?: number;
  /**
   * When held exclusively: when the holder asked for it (epoch ms, by its instance's clock), which
   * tells one holding from the next.
   */
  readonly since?: number;
  /**
   * The fence counter this lock uses, shared with the other locks of its server (on Cluster, of its
   * hash slot): the latest fence handed out there, so at least the holder's fence when it took the
   * lock with fencing; absent when the counter does not exist (docs/locks.md, "Fences").
   */
  readonly fence?: number;
  /** Waiting instances in order, live entries only (at most 100). */
  readonly line: readonly LockLineEntry[];
  /** Members of the line, live or lapsed. */
  readonly lineLength: number;
  /** Callers of this instance waiting in its local cohort for the lock. */
  readonly localWaiters: number;
}
