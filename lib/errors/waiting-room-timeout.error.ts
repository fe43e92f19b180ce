import { RedisLockError } from './redis-lock.error';

/**
 * `WaitingRoomService.wait` gave up after `waitMs` without the visitor being admitted. The visitor
 * keeps its place: a later `join` or `wait` finds it where it stands.
 */
export class WaitingRoomTimeoutError extends RedisLockError {
  /**
   * @param room the room's name
   * @param visitorId the visitor that waited
   * @param waitMs how long it waited
   * @param position its place in line when it gave up (1 = next), as last known
   */
  constructor(
    readonly room: string,
    readonly visitorId: string,
    readonly waitMs: number,
    readonly position: number,
  ) {
    super(
      `waiting room '${room}': visitor '${visitorId}' not admitted within ${waitMs} ms; ` +
        `it is number ${position} in line and keeps its place`,
    );
  }
}
