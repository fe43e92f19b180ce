import type { QueueStats } from '../queue/interfaces/task.interface';

/** What a backlog is read from (`QueueService`): observability depends on plain counts only. */
export interface QueueBacklogSource {
  stats(queue: string): Promise<QueueStats>;
  list(queue: string, state: 'ready', options: { limit: number }): Promise<{ time: number }[]>;
}

/** A queue's task counts and how long its oldest ready task has been due. */
export interface QueueBacklog {
  stats: QueueStats;
  /**
   * How long the first ready task (in claim order) has been due, in ms (`0` with no ready task).
   * Without priorities or groups that is the oldest ready task; with them, the next one to run.
   */
  oldestReadyMs: number;
}

/**
 * Reads the backlog of `queue`: its stats and, when tasks are ready, the first one in claim order
 * (two bounded round trips at most). Used by the health indicator and the queue gauges.
 */
export async function queueBacklog(
  queues: QueueBacklogSource,
  queue: string,
): Promise<QueueBacklog> {
  const stats = await queues.stats(queue);
  const [oldest] = stats.ready > 0 ? await queues.list(queue, 'ready', { limit: 1 }) : [];
  return { stats, oldestReadyMs: oldest ? Math.max(0, Date.now() - oldest.time) : 0 };
}
