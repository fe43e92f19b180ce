import type { JobStatus } from '@bull-board/api/dist/types.js';
import type { QueueStats, QueueTaskState } from '../queue/interfaces/task.interface';

/**
 * The bull-board statuses a `QueueService` queue has, in the order its tabs show them. `completed`
 * is absent: `keepCompleted` keeps acked ids only (no payload, no result), so there is nothing to
 * show; `prioritized` and `waiting-children` have no counterpart (priorities are ready tasks).
 */
export const BOARD_JOB_STATUSES = [
  'active',
  'waiting',
  'paused',
  'delayed',
  'completed',
  'failed',
] as const;

/** A bull-board status this adapter lists. */
export type BoardJobStatus = (typeof BOARD_JOB_STATUSES)[number];

/**
 * Our state behind a bull-board status: ready tasks are `waiting`, or `paused` while the queue is
 * paused (as BullMQ moves its wait list); `leased` is `active`, `dead` is `failed`. `undefined`
 * when the status has no tasks now (`waiting` of a paused queue, `paused` of a running one) or
 * no counterpart at all.
 */
export function stateOfStatus(status: JobStatus, paused: boolean): QueueTaskState | undefined {
  switch (status) {
    case 'active':
      return 'leased';
    case 'waiting':
      return paused ? undefined : 'ready';
    case 'paused':
      return paused ? 'ready' : undefined;
    case 'delayed':
      return 'delayed';
    case 'failed':
      return 'dead';
    default:
      return undefined;
  }
}

/** The bull-board status of a task in `state` (see {@link stateOfStatus}). */
export function statusOfState(state: QueueTaskState, paused: boolean): BoardJobStatus {
  switch (state) {
    case 'leased':
      return 'active';
    case 'ready':
      return paused ? 'paused' : 'waiting';
    case 'delayed':
      return 'delayed';
    case 'completed':
      return 'completed';
    case 'dead':
    case 'cancelled':
      return 'failed';
  }
}

/** bull-board's counts of every status, from `QueueService.stats`. */
export function countsOfStats(stats: QueueStats): Record<JobStatus, number> {
  return {
    active: stats.leased,
    waiting: stats.paused ? 0 : stats.ready,
    paused: stats.paused ? stats.ready : 0,
    delayed: stats.delayed,
    failed: stats.dead,
    completed: 0,
    prioritized: 0,
    'waiting-children': 0,
  };
}
