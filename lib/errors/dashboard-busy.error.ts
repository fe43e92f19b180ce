import { RedisLockError } from './redis-lock.error';

/**
 * The dashboard's overview was refused without being computed: too many other searches wait for
 * their turn already (overviews start at least `overviewIntervalMs` apart), or the app is
 * shutting down while this one waited. The dashboard answers it `429 Too Many Requests` (`503`
 * when shutting down); the page retries on its next poll.
 */
export class DashboardBusyError extends RedisLockError {
  constructor(
    readonly search: string,
    /** Why: the searches holding a turn and the interval, or the shutdown. */
    readonly reason: string,
    /** Whether the app was shutting down. */
    readonly shuttingDown = false,
  ) {
    super(`dashboard overview for search '${search}' refused: ${reason}; try again later`);
  }
}
