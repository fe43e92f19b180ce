import { MAX_QUEUE_BATCH, type QueueStats } from '../../lib';
import { InvalidInputError } from '../common/sample.error';
import { requireId, requireObject } from '../common/validate';

/** Body of `POST /tasks`: the ids of the articles to edit. */
export interface AddTasksRequest {
  ids: string[];
}

/** Answer of `POST /tasks`. */
export interface AddTasksResult {
  /** How many ids were new (an id already in the pool, or being edited, is not added again). */
  added: number;
  ids: string[];
}

/** A task as an editor holds it. */
export interface DeskTask {
  id: string;
  /** 1 the first time the task is handed out, +1 each time it comes back from a lapsed lease. */
  attempt: number;
  /** When it was handed out, epoch ms on the Redis clock. */
  claimedAt: number;
  /** When it returns to the pool unless submitted, epoch ms on the Redis clock. */
  leaseExpiresAt: number;
}

/** Answer of `POST /editors/:id/next`: the task now held, or `null` when the pool is empty. */
export interface NextTaskResult {
  editor: string;
  task: DeskTask | null;
}

/** Answer of `POST /editors/:id/submit`. */
export interface SubmitResult {
  editor: string;
  taskId: string;
  attempt: number;
}

/** Answer of `GET /tasks`. */
export interface DeskStatus {
  /** The `desk` queue's counts: ready (in the pool), delayed, leased (being edited), dead. */
  pool: QueueStats;
  /** Who holds what; `leaseExpiresInMs` ≤ 0 means the lease ran out and the task is back in the pool. */
  holders: { editor: string; taskId: string; attempt: number; leaseExpiresInMs: number }[];
  /** Submitted tasks: by whom, and how many times (always 1). */
  submitted: Record<string, { by: string; times: number }>;
}

/**
 * Checks a `POST /tasks` body: `{ "ids": ["article-1", ...] }` with 1 to `MAX_QUEUE_BATCH`
 * (1,000) ids, what one `enqueue` takes.
 */
export function parseAddTasks(body: unknown): AddTasksRequest {
  const o = requireObject(body, ['ids']);
  if (!Array.isArray(o.ids) || o.ids.length === 0 || o.ids.length > MAX_QUEUE_BATCH) {
    throw new InvalidInputError('ids', o.ids, `an array of 1 to ${MAX_QUEUE_BATCH} ids`);
  }
  return { ids: o.ids.map((id, i) => requireId(`ids[${i}]`, id)) };
}
