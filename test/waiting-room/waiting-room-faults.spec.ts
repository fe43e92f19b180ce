import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { WaitingRoomService } from '../../lib';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import {
  WAITING_ROOM_SCRIPTS,
  type WaitingRoomStore,
} from '../../lib/waiting-room/waiting-room-store';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';
import { whileBusy } from '../support/busy-script';
import { startRedisServer, type RedisServer } from '../support/redis-server';
import { roomKeys } from './support';

/**
 * A `wait` that ends while Redis refuses its unpark, or while its instance parks its visitors
 * again: its visitor must not stay parked under the instance's lease (kept in line with no time
 * limit, then admitted: a pass to nobody). On a server of its own: `BUSY` and `CLIENT KILL` reach
 * every client of a server.
 */
describe('WaitingRoomService.wait: an ended wait is not kept parked', () => {
  const prefix = uniquePrefix('room-faults');
  let server: RedisServer;
  let app: INestApplicationContext;
  let room: WaitingRoomService;
  let store: WaitingRoomStore;
  let instance: string;
  let redis: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    app = await createLockApp({ redis: server.url, keyPrefix: prefix });
    room = app.get(WaitingRoomService);
    store = (room as unknown as { store: WaitingRoomStore }).store;
    instance = (room as unknown as { instance: string }).instance;
    redis = redisClient(server.url);
  });
  /** The pages (signals of waits) of a test, closed after it: a failed test leaves none waiting. */
  const pages: AbortController[] = [];
  function page(): AbortController {
    const controller = new AbortController();
    pages.push(controller);
    return controller;
  }
  afterEach(() => {
    jest.restoreAllMocks();
    for (const controller of pages.splice(0)) controller.abort(new Error('done'));
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
    await server.stop();
  });

  /** Where `visitor` stands in `name`'s keys: the instances it is parked on, its `seen` score. */
  async function parking(name: string, visitor: string) {
    const { parkedBy, seen } = roomKeys(prefix, name);
    // One MULTI: both as of one moment.
    const [[, by], [, score]] = (await redis
      .multi()
      .hget(parkedBy, visitor)
      .zscore(seen, visitor)
      .exec()) as [unknown, string | null][];
    return { parkedBy: by, seen: score };
  }

  /**
   * Closes `closing` (the page of a parked wait, `ends`) while another client's script keeps Redis
   * answering `BUSY`, and sees the wait end and its unpark refused; resolves once `SCRIPT KILL`
   * ended the script, with the unpark calls made from then on, as they settle ('ok' or the error's
   * name).
   */
  async function endWhileBusy(
    closing: AbortController,
    ends: Promise<unknown>,
  ): Promise<Promise<string>[]> {
    const unparks: Promise<string>[] = [];
    const unpark = store.unpark.bind(store);
    jest.spyOn(store, 'unpark').mockImplementation((...args) => {
      const call = unpark(...args);
      unparks.push(
        call.then(
          () => 'ok',
          (err: Error) => err.name,
        ),
      );
      return call;
    });
    await whileBusy(server.url, async () => {
      closing.abort(new Error('page closed'));
      expect(await ends).toMatchObject({ message: 'page closed' });
      await waitFor('the unpark sent', () => unparks.length > 0);
      expect(await unparks[0]).toBe('RedisUnavailableError');
    });
    return unparks;
  }

  /** Counts the lease renewals started from now on once `counting()` is true, when they resolve. */
  function countRenewals(counting: () => boolean): { readonly done: number } {
    const count = { done: 0 };
    const lease = store.lease.bind(store);
    jest.spyOn(store, 'lease').mockImplementation(async (...args) => {
      const counted = counting();
      const reply = await lease(...args);
      if (counted) count.done++;
      return reply;
    });
    return count;
  }

  it("a wait that ends while Redis answers BUSY is unparked before the instance's next lease renewal, which no longer keeps it parked", async () => {
    await room.open('busy', { admitPerSecond: 0, passTtlMs: 60_000, absentMs: 3_000 });
    const other = page();
    const stays = room
      .wait('busy', 'v0', { waitMs: 30_000, signal: other.signal })
      .catch((e: Error) => e);
    const closing = page();
    const ends = room
      .wait('busy', 'v1', { waitMs: 30_000, signal: closing.signal })
      .catch((e: Error) => e);
    await waitFor('2 parked visitors', () => room.localWaiters('busy') === 2);
    expect((await parking('busy', 'v1')).parkedBy).toBe(instance);
    let killed = false;
    const renewals = countRenewals(() => killed);
    const unparks = await endWhileBusy(closing, ends);
    killed = true;
    await waitFor('a lease renewal after the BUSY', () => renewals.done > 0, 3_000);
    // Before: still parked under the lease (seen +inf), for as long as v0 waits here.
    const v1 = await parking('busy', 'v1');
    expect(v1.parkedBy).toBeNull();
    expect(Number(v1.seen)).toBeLessThan(Infinity);
    expect(await unparks[unparks.length - 1]).toBe('ok');
    expect((await parking('busy', 'v0')).parkedBy).toBe(instance);
    expect(await redis.zrange(roomKeys(prefix, 'busy').line, 0, -1)).toEqual(['v0', 'v1']);
    other.abort(new Error('done'));
    await stays;
  });

  it('a wait that ends while Redis answers BUSY, the last on its instance, is unparked before a later wait there renews the lease', async () => {
    await room.open('idle', { admitPerSecond: 0, passTtlMs: 60_000, absentMs: 3_000 });
    const closing = page();
    const ends = room
      .wait('idle', 'v1', { waitMs: 30_000, signal: closing.signal })
      .catch((e: Error) => e);
    await waitFor('1 parked visitor', () => room.localWaiters('idle') === 1);
    await endWhileBusy(closing, ends);
    // Another visitor waits on the same instance: its join and lease renewals renew the lease.
    let parked = false;
    const renewals = countRenewals(() => parked);
    const other = page();
    const next = room
      .wait('idle', 'v2', { waitMs: 30_000, signal: other.signal })
      .catch((e: Error) => e);
    await waitFor('v2 parked', () => room.localWaiters('idle') === 1);
    parked = true;
    await waitFor('a lease renewal for v2', () => renewals.done > 0, 3_000);
    // Before: v1 stayed parked under the lease renewed for v2.
    expect((await parking('idle', 'v1')).parkedBy).toBeNull();
    expect((await parking('idle', 'v2')).parkedBy).toBe(instance);
    other.abort(new Error('done'));
    await next;
  });

  it('a wait that ends while its instance parks its 1,002 visitors again (pub/sub reconnect) is not parked again by a later batch', async () => {
    await room.open('batches', { admitPerSecond: 0, passTtlMs: 60_000, absentMs: 3_000 });
    const { parkedBy, settings } = roomKeys(prefix, 'batches');
    const visitors = new Map<string, AbortController>(
      Array.from({ length: 1_002 }, (_, i) => [`v${i}`, page()] as const),
    );
    const waits = [...visitors].map(([v, { signal }]) =>
      room.wait('batches', v, { waitMs: 30_000, signal }).catch((e: Error) => e),
    );
    await waitFor('1,002 parked visitors', () => room.localWaiters('batches') === 1_002);
    // The page of a visitor of the second batch closes while the first batch is in flight.
    const connection = app.get(RedisLockConnection);
    const run = connection.run.bind(connection);
    const batches: number[] = [];
    let gone = '';
    jest.spyOn(connection, 'run').mockImplementation((script, keys, args, onLate) => {
      const reply = run(script, keys, args, onLate);
      if (script === WAITING_ROOM_SCRIPTS.presence && keys[0] === settings) {
        batches.push(args.length - 2);
        if (batches.length === 1) {
          const first = new Set(args.slice(2));
          gone = [...visitors.keys()].find((v) => !first.has(v))!;
          visitors.get(gone)!.abort(new Error('page closed'));
        }
      }
      return reply;
    });
    const presence = store.presence.bind(store);
    let synced = 0;
    jest.spyOn(store, 'presence').mockImplementation(async (...args) => {
      const reply = await presence(...args);
      if (args[0] === 'batches') synced++;
      return reply;
    });
    // The subscriber connection drops: the hub subscribes again, and the watch parks its
    // visitors again (admissions published meanwhile were lost).
    await redis.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    await waitFor('the visitors parked again', () => synced === 1, 5_000);
    expect(await waits[[...visitors.keys()].indexOf(gone)]).toMatchObject({
      message: 'page closed',
    });
    // Before: parked again by the second batch, after its unpark ran (seen +inf).
    const after = await parking('batches', gone);
    expect(after.parkedBy).toBeNull();
    expect(Number(after.seen)).toBeLessThan(Infinity);
    expect(await redis.hlen(parkedBy)).toBe(1_001);
    expect(await redis.zcard(`${settings}:parkedz:${instance}`)).toBe(1_001);
    expect(batches).toEqual([1_000, 1]);
    for (const controller of visitors.values()) controller.abort(new Error('done'));
    await Promise.all(waits);
  });
});
