import { RedisLockError } from './redis-lock.error';

/** A call named a waiting room that was never opened (or was closed): `WaitingRoomService.open` it first. */
export class WaitingRoomNotOpenError extends RedisLockError {
  /** @param room the room's name */
  constructor(readonly room: string) {
    super(
      `waiting room '${room}' is not open; call waitingRoom.open('${room}', { admitPerSecond, passTtlMs }) first`,
    );
  }
}
