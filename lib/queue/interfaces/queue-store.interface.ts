// What the queue store's parts share without importing it: its settle steps, replica waits and
// enqueue arguments (the worker, the service and enqueue-options.ts use them too), and what the
// flows' part (flows/flow-store.ts) uses of the QueueStore that owns it, so that queue-store.ts
// and flow-store.ts do not import each other.
import type { ResolvedQueueDefaults } from '../../options/resolve-options';
import type { LuaScript } from '../../redis/lua-script';
import type { RedisLockConnection } from '../../redis/redis-connection';
import type { QueueRedisKeys } from '../queue-keys';
import type { LeasedTask } from './task.interface';

/**
 * What a claim does with the caller's finished task before it leases more: `ack` (with its
 * result's JSON in `data`, '' for none), `nack` (retry after `delayMs`, or dead once out of
 * attempts), `fail` (dead at once), `release` (given back unattempted, due after `delayMs`). For
 * nack and fail, `data` is the failure (`encodeTaskError`).
 */
export interface SettleStep {
  kind: 'ack' | 'nack' | 'fail' | 'release';
  task: LeasedTask;
  delayMs?: number;
  data?: string;
  /** How long its handler ran (a worker's), for the queue's run-time percentiles. */
  runMs?: number;
}

/** `waitForReplicas` of a queue write: `WAIT replicas timeoutMs` after it. */
export interface ReplicaWait {
  replicas: number;
  timeoutMs: number;
}

/** What `enqueue.lua` is given besides the ids. */
export interface EnqueueArgs {
  delayMs: number;
  replace: boolean;
  /** The stored payload field (`storedPayload`); undefined: none (replace keeps the stored one). */
  payload?: string;
  priority: number;
  group: string;
  /** `storedOwnOptions`; '' for none. */
  opts: string;
  /** Unset: the module's `queue.waitForReplicas`; `false`: none. */
  waitForReplicas?: ReplicaWait | false;
  /** Each new id is claimed before every ready task (plain tasks due now only). */
  lifo?: boolean;
  /** `deduplication` (one id only): not added while another task holds this id. */
  dedup?: { id: string; ttlMs: number; keepLastIfActive: boolean };
}

/** What `FlowStore` uses of the `QueueStore` that owns it. */
export interface FlowStoreHost {
  readonly connection: RedisLockConnection;
  readonly defaults: ResolvedQueueDefaults;
  /** Keys of `queue` (a checked name; throws `QueueError` for a bad one). */
  keys(queue: unknown): QueueRedisKeys;
  /** Runs a writing script, then waits for replicas per `wait` (`QueueStore.write`). */
  write(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
    queue: string,
    operation: string,
    wait: ReplicaWait | false | undefined,
  ): Promise<unknown>;
  /** `QueueStore.cancel`. */
  cancel(
    k: QueueRedisKeys,
    id: string,
    reason: string,
  ): Promise<'cancelled' | 'signalled' | 'finished' | 'not-found'>;
}
