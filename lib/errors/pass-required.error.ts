import { RedisLockError } from './redis-lock.error';

/**
 * A call guarded by `@RequiresPass` came from a visitor without a valid pass of the waiting room
 * (never admitted, or its pass expired). With `LockInterceptor`: `403 Forbidden` with
 * `{ statusCode: 403, error: 'Forbidden', message, room }`.
 */
export class PassRequiredError extends RedisLockError {
  /**
   * @param room the waiting room whose pass is required
   * @param visitorId the visitor the call came from (the template filled in)
   */
  constructor(
    readonly room: string,
    readonly visitorId: string,
  ) {
    super(
      `visitor '${visitorId}' has no pass of waiting room '${room}': join the room and wait ` +
        'for its turn (or its pass expired)',
    );
  }
}
