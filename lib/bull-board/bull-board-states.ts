import type { JobStatus } from '@bull-board/api/dist/types.js';
import type { QueueStats, QueueTaskState } from '../queue/interfaces/task.interface';

/**
 * The bull-board statuses a `QueueService` queue has, in the order its tabs show them.
 * `completed` lists the completed tasks `keepCompleted` keeps (with their results); `failed` the
 * dead tasks, then the cancelled ones, then the expired ones (bull-board has no expired status:
 * their failedReason reads `TaskExpiredError: …`); `waiting-children` the flow parents waiting for their
 * children. `prioritized` has no tab (tasks with a priority are ready tasks).
 */
export const BOARD_JOB_STATUSES = [
  'active',
  'waiting',
  'waiting-children',
  'paused',
  'delayed',
  'completed',
  'failed',
] as const;

/** A bull-board status this adapter lists. */
export type BoardJobStatus = (typeof BOARD_JOB_STATUSES)[number];

/**
 * Our states behind a bull-board status, in the order its list concatenates them: ready tasks are
 * `waiting`, or `paused` while the queue is paused (as BullMQ moves its wait list); `leased` is
 * `active`; `completed` is `completed`; `dead`, `cancelled` then `expired` are `failed`. Empty when the
 * status has no tasks now (`waiting` of a paused queue, `paused` of a running one) or no
 * counterpart at all.
 */
export function statesOfStatus(status: JobStatus, paused: boolean): readonly QueueTaskState[] {
  switch (status) {
    case 'active':
      return ['leased'];
    case 'waiting':
      return paused ? [] : ['ready'];
    case 'paused':
      return paused ? ['ready'] : [];
    case 'delayed':
      return ['delayed'];
    case 'completed':
      return ['completed'];
    case 'failed':
      return ['dead', 'cancelled', 'expired'];
    case 'waiting-children':
      return ['waiting-children'];
    default:
      return [];
  }
}

/** The bull-board status of a task in `state` (see {@link statesOfStatus}). */
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
    case 'expired':
      return 'failed';
    case 'waiting-children':
      return 'waiting-children';
  }
}

/** How many tasks `stats` counted in `state`. */
export function countOfState(stats: QueueStats, state: QueueTaskState): number {
  return state === 'waiting-children' ? stats.waitingChildren : stats[state];
}

/** bull-board's counts of every status, from `QueueService.stats`. */
export function countsOfStats(stats: QueueStats): Record<JobStatus, number> {
  return {
    active: stats.leased,
    waiting: stats.paused ? 0 : stats.ready,
    paused: stats.paused ? stats.ready : 0,
    delayed: stats.delayed,
    failed: stats.dead + stats.cancelled + stats.expired,
    completed: stats.completed,
    prioritized: 0,
    'waiting-children': stats.waitingChildren,
  };
}
