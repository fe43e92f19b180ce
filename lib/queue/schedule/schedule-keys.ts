import { taggedKey } from '../../redis/tagged-key';

/** The Redis keys of one queue's schedules; they share the queue's hash tag. */
export interface ScheduleRedisKeys {
  /** HASH schedule id -> JSON definition. */
  definitions: string;
  /** HASH schedule id -> '<last enqueued tick> <tasks enqueued>'. */
  state: string;
}

/** Keys of queue `name`'s schedules: `<queue base>:schedules` and `…:schedule-state`. */
export function scheduleRedisKeys(prefix: string, name: string): ScheduleRedisKeys {
  const base = taggedKey(prefix, 'queue', name);
  return { definitions: `${base}:schedules`, state: `${base}:schedule-state` };
}

/**
 * SET of the queues that have schedules (no hash tag: a plain index), and the channel on which a
 * change to a queue's schedules is announced (message: the queue name).
 */
export function scheduleIndexKey(prefix: string): string {
  return `${prefix}queue-schedules`;
}
