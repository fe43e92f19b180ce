import { randomBytes } from 'node:crypto';
import { BeforeApplicationShutdown, Injectable } from '@nestjs/common';
import { RedisLockError } from '../errors/redis-lock.error';
import { checkKeyName } from '../lock/lock-keys';
import { RedisLockConnection } from '../redis/redis-connection';
import { RoomWatch, shuttingDown } from './room-watch';
import {
  resolveWaitingRoomOptions,
  resolveWaitOptions,
  type WaitingRoomOptions,
  type WaitingRoomStatus,
  type WaitingRoomWaitOptions,
} from './waiting-room-options';
import { type JoinReply, WaitingRoomStore } from './waiting-room-store';

/**
 * A fair waiting room in front of a sale: visitors join a line in Redis and are let in first come
 * first served, across every instance of the app, at `admitPerSecond`; each one admitted gets a
 * pass valid for `passTtlMs` (`hasPass`, `@RequiresPass`). A visitor that comes back keeps its
 * place; one not seen for `absentMs` loses it. Redis time only; waiting visitors cost no Redis
 * call each (pub/sub and one timer per room and instance); every key of a room expires once nobody
 * uses it, but its settings, which stay until `close`. Provided by `RedisLockModule` (and
 * `createRedisLock`).
 * @example
 * await waitingRoom.open('sale', { admitPerSecond: 50, passTtlMs: 10 * 60_000 });
 * const { position, etaMs, admitted } = await waitingRoom.join('sale', visitorId);
 */
@Injectable()
export class WaitingRoomService implements BeforeApplicationShutdown {
  private readonly store: WaitingRoomStore;
  private readonly watches = new Map<string, RoomWatch>();
  /** This instance's id in the rooms' leases. */
  private readonly instance = randomBytes(9).toString('base64url');
  /** The shutdown hook ran: a `wait` started since would park in a watch nothing closes. */
  private closing = false;

  constructor(private readonly connection: RedisLockConnection) {
    this.store = new WaitingRoomStore(connection);
  }

  /**
   * Opens room `room`, or changes its settings live, for every instance: visitors keep their
   * places, passes already given stand, and the next admission comes one new interval after the
   * last one.
   * @param room the room's name (a non-empty string of at most 512 bytes; `{tag}` rules as for
   *   lock keys)
   * @throws LockKeyError for an invalid name
   * @throws RedisLockOptionsError for an invalid option, naming it
   * @example
   * await waitingRoom.open('sale', { admitPerSecond: 0, passTtlMs: 600_000 }); // hold the line
   * await waitingRoom.open('sale', { admitPerSecond: 50, passTtlMs: 600_000 }); // the sale starts
   */
  async open(room: string, options: WaitingRoomOptions): Promise<void> {
    const keys = this.store.keys(room);
    await this.store.open(keys, resolveWaitingRoomOptions(options));
  }

  /**
   * Deletes room `room`: its settings, line and passes. Visitors waiting in `wait` reject with
   * `WaitingRoomNotOpenError` (at their next presence check).
   */
  async close(room: string): Promise<void> {
    await this.store.close(this.store.keys(room));
  }

  /**
   * Puts `visitorId` in line (at the end), or, for a visitor already in line, keeps its place and
   * marks it seen; says where it stands. A visitor holding a valid pass is `admitted`; one whose
   * pass expired joins again at the end. When nobody is ahead and the rate allows, it is admitted
   * at once.
   * @throws WaitingRoomNotOpenError when the room was not opened
   * @throws LockKeyError for an invalid room name or visitor id (a non-empty string of at most
   *   512 bytes)
   * @example
   * const { admitted, position, etaMs } = await waitingRoom.join('sale', session.id);
   */
  async join(room: string, visitorId: string): Promise<WaitingRoomStatus> {
    const keys = this.store.keys(room);
    return statusOf(await this.store.join(room, keys, checkVisitor(visitorId)));
  }

  /**
   * Joins (as `join`) and resolves once `visitorId` is admitted, with its status (`admitted:
   * true`). The visitor is parked: woken by the room's pub/sub channel, with one timer per room
   * and instance derived from the room's clock in Redis, never polling Redis per visitor; while it
   * waits its instance marks it seen. Giving up (`waitMs`, `signal`) keeps its place.
   * @throws WaitingRoomTimeoutError after `waitMs`
   * @throws WaitingRoomPlaceLostError when it was dropped from the line meanwhile
   * @throws WaitingRoomNotOpenError when the room was not opened (or was closed)
   * @throws RedisUnavailableError when its join is not answered, or the module shuts down (the
   *   visitor keeps its place)
   * @example
   * const status = await waitingRoom.wait('sale', visitorId, {
   *   waitMs: 30 * 60_000,
   *   signal: AbortSignal.timeout(60 * 60_000),
   *   onProgress: ({ position, etaMs }) => send({ position, etaMs }),
   * });
   */
  async wait(
    room: string,
    visitorId: string,
    options: WaitingRoomWaitOptions,
  ): Promise<WaitingRoomStatus> {
    const keys = this.store.keys(room);
    const visitor = checkVisitor(visitorId);
    const o = resolveWaitOptions(options);
    o.signal?.throwIfAborted();
    if (this.closing) throw shuttingDown();
    const name = keys[0];
    let watch = this.watches.get(name);
    if (!watch) {
      watch = new RoomWatch(room, keys, this.instance, this.store, this.connection.hub, () =>
        this.watches.delete(name),
      );
      this.watches.set(name, watch);
    }
    let reply: JoinReply;
    try {
      await watch.listen(visitor);
      reply = await this.store.join(room, keys, visitor, this.instance);
    } catch (err) {
      watch.done(visitor, true);
      // The connection closed under it (`pub/sub hub is closed`): the module shuts down.
      if (this.closing && !(err instanceof RedisLockError)) throw shuttingDown();
      throw err;
    }
    if (reply.admitted) {
      watch.done(visitor, false);
      return statusOf(reply);
    }
    return watch.park(visitor, reply.value, reply, o.waitMs, o.signal, o.onProgress);
  }

  /**
   * Whether `visitorId` holds a valid pass of `room` now (it was admitted less than `passTtlMs`
   * ago).
   */
  async hasPass(room: string, visitorId: string): Promise<boolean> {
    return (await this.store.pass(this.store.keys(room), checkVisitor(visitorId))) > 0;
  }

  /** @internal visitors of `room` parked on this instance (tests) */
  localWaiters(room: string): number {
    return this.watches.get(this.store.keys(room)[0])?.size ?? 0;
  }

  /** @internal What must end before the shutdown starts (see `LockService.shutdownAfter`). */
  shutdownAfter?: () => Promise<unknown>;

  /**
   * Ends the waits parked on this instance: they reject, and their visitors keep their places
   * for `absentMs` (a page that reconnects to another instance finds its place).
   */
  async beforeApplicationShutdown(): Promise<void> {
    // As LockService's: the queue workers drain first, and their handlers may join or wait.
    await this.shutdownAfter?.().catch(() => undefined);
    this.closing = true;
    const watches = [...this.watches.values()];
    this.watches.clear();
    await Promise.all(watches.map((watch) => watch.close()));
  }
}

function checkVisitor(visitorId: unknown): string {
  return checkKeyName(visitorId, 'visitor id');
}

function statusOf(reply: JoinReply): WaitingRoomStatus {
  return reply.admitted
    ? { admitted: true, position: 0, etaMs: 0, passExpiresInMs: reply.value }
    : {
        admitted: false,
        position: reply.value,
        etaMs: RoomWatch.eta(reply, reply.value),
        passExpiresInMs: 0,
      };
}
