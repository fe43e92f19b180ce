import { RedisLockError } from './redis-lock.error';

/**
 * A visitor waiting in `WaitingRoomService.wait` is no longer in line: it was not seen for the
 * room's `absentMs` (its instance could not reach Redis that long), or the room was closed.
 * Joining again puts it at the end of the line.
 */
export class WaitingRoomPlaceLostError extends RedisLockError {
  /**
   * @param room the room's name
   * @param visitorId the visitor
   */
  constructor(
    readonly room: string,
    readonly visitorId: string,
  ) {
    super(
      `waiting room '${room}': visitor '${visitorId}' lost its place (not seen for the room's ` +
        'absentMs, or the room was closed); join again to stand at the end of the line',
    );
  }
}
