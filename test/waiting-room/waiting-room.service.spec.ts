import 'reflect-metadata';
import { Logger, type INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  LockKeyError,
  RedisLockOptionsError,
  RedisUnavailableError,
  WaitingRoomNotOpenError,
  WaitingRoomPlaceLostError,
  WaitingRoomService,
  WaitingRoomTimeoutError,
  type WaitingRoomStatus,
} from '../../lib';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import { RoomWatch } from '../../lib/waiting-room/room-watch';
import { WAITING_ROOM_SCRIPTS } from '../../lib/waiting-room/waiting-room-store';
import {
  createLockApp,
  deferred,
  redisClient,
  redisTimeMs,
  uniquePrefix,
  waitFor,
} from '../support/helpers';
import { admissionTimes, inversions, joinInTurn, roomKeys } from './support';

describe('WaitingRoomService', () => {
  const prefix = uniquePrefix('room');
  let apps: INestApplicationContext[];
  let rooms: WaitingRoomService[];
  let redis: Redis;

  beforeAll(async () => {
    // Three instances of the app on one Redis.
    apps = await Promise.all([0, 1, 2].map(() => createLockApp({ keyPrefix: prefix })));
    rooms = apps.map((app) => app.get(WaitingRoomService));
    redis = redisClient();
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    redis.disconnect();
  });

  it('join is idempotent: a visitor that comes back keeps its place, on any instance', async () => {
    await rooms[0].open('held', { admitPerSecond: 0, passTtlMs: 60_000 });
    await joinInTurn(rooms, 'held', ['ann', 'bob', 'cid']);
    expect(await rooms[2].join('held', 'bob')).toEqual({
      admitted: false,
      position: 2,
      etaMs: null,
      passExpiresInMs: 0,
    });
    expect((await rooms[1].join('held', 'ann')).position).toBe(1);
    expect((await rooms[0].join('held', 'cid')).position).toBe(3);
    expect((await rooms[0].join('held', 'dan')).position).toBe(4);
    expect(await redis.zcard(roomKeys(prefix, 'held').line)).toBe(4);
    expect(await rooms[0].hasPass('held', 'ann')).toBe(false);
  });

  it('admits at once when nobody is ahead, then one per 1000 / admitPerSecond ms, with the ETA', async () => {
    await rooms[0].open('quiet', { admitPerSecond: 2, passTtlMs: 60_000 });
    const first = await rooms[0].join('quiet', 'ann');
    expect(first.admitted).toBe(true);
    expect(first.passExpiresInMs).toBeGreaterThan(59_000);
    expect(await rooms[1].hasPass('quiet', 'ann')).toBe(true);
    const before = Date.now();
    const second = await rooms[1].join('quiet', 'bob');
    const third = await rooms[2].join('quiet', 'cid');
    const between = Date.now() - before;
    expect(second).toMatchObject({ admitted: false, position: 1 });
    expect(third).toMatchObject({ admitted: false, position: 2 });
    // One interval (500 ms) per visitor ahead, less the time between the two answers.
    expect(third.etaMs! - second.etaMs!).toBeGreaterThanOrEqual(500 - between - 1);
    expect(third.etaMs! - second.etaMs!).toBeLessThanOrEqual(501);
  });

  it('after the room stood empty, admits the first visitor at once and the next one a full interval later', async () => {
    const passTtlMs = 60_000;
    const { settings } = roomKeys(prefix, 'idle');
    await rooms[0].open('idle', { admitPerSecond: 0.5, passTtlMs });
    // Empty for three intervals (2 s each), then for half of one: the room's clock says when.
    for (const [round, idleMs] of [3 * 2_000, 1_000].entries()) {
      const [first, second] = [`first${round}`, `second${round}`];
      await redis.hset(settings, 'next', (await redisTimeMs(redis)) - idleMs);
      expect(await rooms[0].join('idle', first)).toMatchObject({ admitted: true });
      expect(await rooms[1].join('idle', second)).toMatchObject({ admitted: false, position: 1 });
      // The next admission: one interval after the first visitor's, by Redis.
      const [admittedAt] = await admissionTimes(redis, prefix, 'idle', [first], passTtlMs);
      expect(Number(await redis.hget(settings, 'next')) - admittedAt!).toBe(2_000);
      // The second visitor's turn (when it is admitted; the line is then empty again).
      await redis.hset(settings, 'next', (await redisTimeMs(redis)) - 1);
      expect(await rooms[2].join('idle', second)).toMatchObject({ admitted: true });
    }
  });

  it('admits FIFO by join across 3 instances: 0 inversions, each waiter resolved admitted', async () => {
    const passTtlMs = 60_000;
    await rooms[0].open('fifo', { admitPerSecond: 40, passTtlMs });
    // Held first so that everyone is in line before the first admission.
    await rooms[0].open('fifo', { admitPerSecond: 0, passTtlMs });
    const visitors = Array.from({ length: 60 }, (_, i) => `v${i}`);
    await joinInTurn(rooms, 'fifo', visitors);
    const order: string[][] = [[], [], []];
    const waits = visitors.map((v, i) =>
      rooms[i % 3].wait('fifo', v, { waitMs: 30_000 }).then((s) => {
        order[i % 3].push(v);
        return s;
      }),
    );
    await waitFor(
      '60 parked visitors',
      () => rooms.reduce((n, r) => n + r.localWaiters('fifo'), 0) === 60,
    );
    await rooms[1].open('fifo', { admitPerSecond: 40, passTtlMs });
    const statuses = await Promise.all(waits);
    expect(statuses.every((s) => s.admitted && s.position === 0)).toBe(true);
    // Each instance heard of its visitors in join order…
    for (let k = 0; k < 3; k++) expect(order[k]).toEqual(visitors.filter((_, i) => i % 3 === k));
    // …and Redis admitted them in join order.
    const times = await admissionTimes(redis, prefix, 'fifo', visitors, passTtlMs);
    expect(times.every((t) => t !== undefined)).toBe(true);
    expect(inversions(times as number[])).toBe(0);
    // At 40 a second, 60 visitors take at least 59 intervals of 25 ms (Redis time).
    expect(times[59]! - times[0]!).toBeGreaterThanOrEqual(59 * 25 - 1);
  });

  it('takes a rate change live, for every instance: a held line starts moving, places kept', async () => {
    await rooms[0].open('live', { admitPerSecond: 0, passTtlMs: 60_000 });
    const visitors = ['a', 'b', 'c', 'd', 'e'];
    await joinInTurn(rooms, 'live', visitors);
    const progress: WaitingRoomStatus[] = [];
    const waits = visitors.map((v, i) =>
      rooms[i % 3].wait('live', v, {
        waitMs: 30_000,
        onProgress: v === 'e' ? (s) => progress.push(s) : undefined,
      }),
    );
    await waitFor(
      '5 parked visitors',
      () => rooms.reduce((n, r) => n + r.localWaiters('live'), 0) === 5,
    );
    // A settings change that keeps the room held: places are kept, nobody admitted.
    await rooms[2].open('live', { admitPerSecond: 0, passTtlMs: 30_000 });
    expect((await rooms[0].join('live', 'c')).position).toBe(3);
    expect(await rooms[0].hasPass('live', 'a')).toBe(false);
    await rooms[2].open('live', { admitPerSecond: 1_000, passTtlMs: 30_000 });
    const statuses = await Promise.all(waits);
    expect(statuses.map((s) => s.admitted)).toEqual([true, true, true, true, true]);
    expect(statuses.every((s) => s.passExpiresInMs <= 30_000)).toBe(true);
    expect(progress.every((s) => !s.admitted)).toBe(true);
  });

  it('logs an onProgress that throws and ignores it: the other waiters are still told, every wait goes on', async () => {
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      await rooms[0].open('progress', { admitPerSecond: 0, passTtlMs: 60_000 });
      const controller = new AbortController();
      const told = new Map<string, WaitingRoomStatus[]>();
      const waitOn = (visitor: string) =>
        rooms[0]
          .wait('progress', visitor, {
            waitMs: 30_000,
            signal: controller.signal,
            onProgress: (status) => {
              told.set(visitor, [...(told.get(visitor) ?? []), status]);
              if (visitor === 'thrower') throw new Error('page gone');
            },
          })
          .catch((e) => e);
      // Parked first: its callback runs before the others'.
      const waits = [waitOn('thrower')];
      await waitFor('a parked visitor', () => rooms[0].localWaiters('progress') === 1);
      waits.push(waitOn('y'), waitOn('z'));
      await waitFor('3 parked visitors', () => rooms[0].localWaiters('progress') === 3);
      // New settings (still held): every ETA changed, each waiter is told at its next progress tick.
      await rooms[1].open('progress', { admitPerSecond: 0, passTtlMs: 30_000 });
      await waitFor('progress for every waiter', () => told.size === 3, 5_000, 20);
      expect(told.get('y')).toEqual([
        { admitted: false, position: 2, etaMs: null, passExpiresInMs: 0 },
      ]);
      expect(told.get('z')).toEqual([
        { admitted: false, position: 3, etaMs: null, passExpiresInMs: 0 },
      ]);
      expect(logged.mock.calls.map(([message]) => message)).toEqual([
        "waiting room 'progress': onProgress of visitor 'thrower' threw: page gone",
      ]);
      // Its wait goes on: all three are still parked, and end on their signal.
      expect(rooms[0].localWaiters('progress')).toBe(3);
      controller.abort(new Error('done'));
      for (const err of await Promise.all(waits)) expect(err.message).toBe('done');
    } finally {
      logged.mockRestore();
    }
  });

  it('drops a visitor not seen for absentMs; parked visitors keep their places', async () => {
    await rooms[0].open('absent', { admitPerSecond: 0, passTtlMs: 60_000, absentMs: 3_000 });
    await rooms[0].join('absent', 'gone');
    // Joined one after the other, so their order is known (a wait keeps a joined visitor's place).
    await rooms[1].join('absent', 'stay1');
    await rooms[2].join('absent', 'stay2');
    const controller = new AbortController();
    const parked = ['stay1', 'stay2'].map((v, i) =>
      rooms[i + 1].wait('absent', v, { waitMs: 30_000, signal: controller.signal }).catch((e) => e),
    );
    const { line } = roomKeys(prefix, 'absent');
    await waitFor(
      'the absent visitor dropped',
      async () => (await redis.zscore(line, 'gone')) === null,
      10_000,
      100,
    );
    expect(await redis.zrange(line, 0, -1)).toEqual(['stay1', 'stay2']);
    expect((await rooms[0].join('absent', 'stay1')).position).toBe(1);
    // Coming back after its place was lost: the end of the line.
    expect((await rooms[0].join('absent', 'gone')).position).toBe(3);
    controller.abort();
    await Promise.all(parked);
  });

  it('drops the visitors of an instance whose lease ran out (crashed); their waits end with WaitingRoomPlaceLostError', async () => {
    await rooms[0].open('crash', { admitPerSecond: 0, passTtlMs: 60_000, absentMs: 3_000 });
    await rooms[0].join('crash', 'elsewhere');
    const lost = ['c1', 'c2'].map((v) =>
      rooms[1].wait('crash', v, { waitMs: 30_000 }).catch((e) => e),
    );
    await waitFor('2 parked visitors', () => rooms[1].localWaiters('crash') === 2);
    const { leases, line } = roomKeys(prefix, 'crash');
    // The instance stops renewing as if it had crashed: its lease is found expired.
    const [instance] = await redis.zrange(leases, 0, -1);
    await redis.zadd(leases, 1, instance);
    await rooms[2].join('crash', 'later');
    expect(await redis.zrange(line, 0, -1)).toEqual(['elsewhere', 'later']);
    for (const err of await Promise.all(lost)) {
      expect(err).toBeInstanceOf(WaitingRoomPlaceLostError);
      expect(err.message).toMatch(/lost its place/);
    }
  });

  it('gives passes valid passTtlMs; an expired pass is gone and its visitor joins again at the end', async () => {
    await rooms[0].open('ttl', { admitPerSecond: 0, passTtlMs: 300 });
    await joinInTurn(rooms, 'ttl', ['p1', 'p2']);
    await rooms[0].open('ttl', { admitPerSecond: 1_000, passTtlMs: 300 });
    const admitted = await rooms[0].wait('ttl', 'p1', { waitMs: 10_000 });
    expect(admitted.passExpiresInMs).toBeLessThanOrEqual(300);
    expect(await rooms[1].hasPass('ttl', 'p1')).toBe(true);
    await waitFor(
      'the pass to expire',
      async () => !(await rooms[2].hasPass('ttl', 'p1')),
      5_000,
      20,
    );
    await rooms[0].open('ttl', { admitPerSecond: 0, passTtlMs: 300 });
    await rooms[0].join('ttl', 'p3');
    // p2 may still be in line (the room held again right after p1's turn): p1 is last either way.
    const back = await rooms[0].join('ttl', 'p1');
    const line = await redis.zrange(roomKeys(prefix, 'ttl').line, 0, -1);
    expect(back).toMatchObject({ admitted: false, position: line.length });
    expect(line.slice(-2)).toEqual(['p3', 'p1']);
    // Nothing of the passes is left once they all expired.
    await waitFor(
      'the passes key to expire',
      async () => (await redis.exists(roomKeys(prefix, 'ttl').passes)) === 0,
      5_000,
      20,
    );
  });

  it("an instance's next lease renewal forgets its parked visitors that were admitted; one admitted comes back as a plain visitor", async () => {
    await rooms[0].open('forget', { admitPerSecond: 0, passTtlMs: 60_000, absentMs: 3_000 });
    await joinInTurn(rooms, 'forget', ['a', 'b']);
    const { parkedBy, seen, passes } = roomKeys(prefix, 'forget');
    const first = ['a', 'b'].map((v) => rooms[0].wait('forget', v, { waitMs: 30_000 }));
    await waitFor('2 parked visitors', () => rooms[0].localWaiters('forget') === 2);
    await rooms[1].open('forget', { admitPerSecond: 1_000, passTtlMs: 60_000, absentMs: 3_000 });
    await Promise.all(first);
    await rooms[1].open('forget', { admitPerSecond: 0, passTtlMs: 60_000, absentMs: 3_000 });
    // The admission left their parking (one command for them all, at the next renewal).
    expect(await redis.hmget(parkedBy, 'a', 'b')).toEqual([expect.any(String), expect.any(String)]);
    // 'z' keeps the instance renewing its lease (every absentMs / 3).
    await rooms[0].join('forget', 'z');
    const controller = new AbortController();
    const z = rooms[0].wait('forget', 'z', { waitMs: 30_000, signal: controller.signal });
    const zDone = z.catch((e) => e);
    await waitFor(
      "the admitted visitors' parking forgotten",
      async () => (await redis.hmget(parkedBy, 'a', 'b')).every((x) => x === null),
      10_000,
      50,
    );
    expect(await redis.zmscore(seen, 'a', 'b', 'z')).toEqual([null, null, 'inf']);
    expect(await redis.hexists(parkedBy, 'z')).toBe(1);
    expect(await redis.zscore(passes, 'a')).not.toBeNull();
    controller.abort();
    await zDone;
  });

  it('a visitor parked before its pass expired joins again as a plain visitor: seen, and dropped when absent', async () => {
    const settings = { passTtlMs: 200, absentMs: 3_000 };
    await rooms[0].open('again', { admitPerSecond: 0, ...settings });
    const { parkedBy, seen, line } = roomKeys(prefix, 'again');
    // Parked on rooms[1], which has no visitor left to renew its lease for once it is admitted.
    const parked = rooms[1].wait('again', 'p', { waitMs: 30_000 });
    await waitFor('a parked visitor', () => rooms[1].localWaiters('again') === 1);
    await rooms[0].open('again', { admitPerSecond: 1_000, ...settings });
    expect(await parked).toMatchObject({ admitted: true });
    expect(await redis.hexists(parkedBy, 'p')).toBe(1);
    await waitFor(
      'the pass to expire',
      async () => !(await rooms[0].hasPass('again', 'p')),
      5_000,
      20,
    );
    await rooms[0].open('again', { admitPerSecond: 0, ...settings });
    expect(await rooms[0].join('again', 'p')).toMatchObject({ admitted: false, position: 1 });
    expect(await redis.hexists(parkedBy, 'p')).toBe(0);
    expect(Number(await redis.zscore(seen, 'p'))).toBeLessThan(Infinity);
    // Another visitor keeps the line alive (and each join drops those absent): 'p' goes.
    await waitFor(
      "the absent visitor dropped, the line's keys kept alive by another one",
      async () =>
        (await rooms[2].join('again', 'r')).position === 1 &&
        (await redis.zscore(line, 'p')) === null,
      10_000,
      200,
    );
  });

  it('wait: times out with the position, keeps the place; an aborted wait rejects with the reason', async () => {
    await rooms[0].open('timeout', { admitPerSecond: 0, passTtlMs: 60_000 });
    await rooms[0].join('timeout', 'first');
    const err = await rooms[1].wait('timeout', 'second', { waitMs: 50 }).catch((e) => e);
    expect(err).toBeInstanceOf(WaitingRoomTimeoutError);
    expect(err).toMatchObject({ room: 'timeout', visitorId: 'second', position: 2 });
    expect(err.message).toMatch(/'second' not admitted within 50 ms; it is number 2/);
    const controller = new AbortController();
    const aborted = rooms[1]
      .wait('timeout', 'second', { waitMs: 10_000, signal: controller.signal })
      .catch((e) => e);
    await waitFor('a parked visitor', () => rooms[1].localWaiters('timeout') === 1);
    controller.abort(new Error('page closed'));
    expect((await aborted).message).toBe('page closed');
    expect(rooms[1].localWaiters('timeout')).toBe(0);
    expect((await rooms[0].join('timeout', 'second')).position).toBe(2);
    // Aborted while it joins: it ends, unparked, and the instance keeps no watch of the room.
    const early = new AbortController();
    const abortedEarly = rooms[2].wait('timeout', 'third', {
      waitMs: 10_000,
      signal: early.signal,
    });
    early.abort(new Error('gone at once'));
    await expect(abortedEarly).rejects.toThrow('gone at once');
    expect(rooms[2].localWaiters('timeout')).toBe(0);
    const { parkedBy } = roomKeys(prefix, 'timeout');
    await waitFor('the visitor unparked', async () => (await redis.hlen(parkedBy)) === 0);
    expect((await rooms[0].join('timeout', 'third')).position).toBe(3);
  });

  it('a visitor waiting twice on one instance stays parked when one of its waits ends; the other is admitted in its turn', async () => {
    await rooms[0].open('twice', { admitPerSecond: 0, passTtlMs: 60_000 });
    const { parkedBy } = roomKeys(prefix, 'twice');
    // A page that reconnected before its old request's abort: the same visitor waits twice.
    const old = new AbortController();
    const first = rooms[1].wait('twice', 'alice', { waitMs: 30_000, signal: old.signal });
    const second = rooms[1].wait('twice', 'alice', { waitMs: 30_000 });
    await waitFor('two waits parked', () => rooms[1].localWaiters('twice') === 1);
    await waitFor('alice parked', async () => (await redis.hexists(parkedBy, 'alice')) === 1);
    old.abort(new Error('old request gone'));
    await expect(first).rejects.toThrow('old request gone');
    // The unpark that the abort would send goes out within a turn, before this join.
    await new Promise((resolve) => setImmediate(resolve));
    expect(await rooms[1].join('twice', 'bob')).toMatchObject({ position: 2 });
    expect(await redis.hexists(parkedBy, 'alice')).toBe(1);
    await rooms[0].open('twice', { admitPerSecond: 1, passTtlMs: 60_000 });
    await expect(second).resolves.toMatchObject({ admitted: true });
    expect(await rooms[0].hasPass('twice', 'alice')).toBe(true);
  });

  it('a wait whose join is in flight when the module shuts down rejects then (RedisUnavailableError), unparked', async () => {
    const app = await createLockApp({ keyPrefix: prefix });
    const room = app.get(WaitingRoomService);
    await room.open('shutdown', { admitPerSecond: 0, passTtlMs: 60_000 });
    await rooms[0].join('shutdown', 'ahead');
    // The join's script is held until the shutdown hook has ended the room's local waits.
    const connection = app.get(RedisLockConnection);
    const run = connection.run.bind(connection);
    const gate = deferred<void>();
    let joined: Promise<unknown> | undefined;
    jest.spyOn(connection, 'run').mockImplementation((script, keys, args) => {
      if (script !== WAITING_ROOM_SCRIPTS.join) return run(script, keys, args);
      joined = gate.promise.then(() => run(script, keys, args));
      return joined;
    });
    const hook = room.beforeApplicationShutdown.bind(room);
    jest.spyOn(room, 'beforeApplicationShutdown').mockImplementation(async () => {
      await hook();
      gate.resolve();
      await joined;
    });
    const waiting = room.wait('shutdown', 'late', { waitMs: 5_000 }).catch((e: unknown) => e);
    await waitFor('the join sent', () => joined !== undefined);
    await app.close();
    const err = await waiting;
    expect(err).toBeInstanceOf(RedisUnavailableError);
    expect((err as Error).message).toMatch(/the module is shutting down/);
    expect(await rooms[0].join('shutdown', 'late')).toMatchObject({ position: 2 });
  });

  it('a wait started after the shutdown hook rejects at once (RedisUnavailableError), and so does one after the connection closed', async () => {
    const app = await createLockApp({ keyPrefix: prefix });
    const room = app.get(WaitingRoomService);
    await room.open('late', { admitPerSecond: 0, passTtlMs: 60_000 });
    // Nest runs the hook, then closes the HTTP server, then the connection: a request between.
    await room.beforeApplicationShutdown();
    const between = await room.wait('late', 'v', { waitMs: 1_000 }).catch((e: unknown) => e);
    expect(between).toBeInstanceOf(RedisUnavailableError);
    expect((between as Error).message).toMatch(/the module is shutting down/);
    expect(room.localWaiters('late')).toBe(0);
    await app.close();
    const after = await room.wait('late', 'v', { waitMs: 1_000 }).catch((e: unknown) => e);
    expect(after).toBeInstanceOf(RedisUnavailableError);
    expect((after as Error).message).toMatch(/the module is shutting down/);
  });

  it("resolves a wait whose visitor is admitted before its join's reply is read (the message came first)", async () => {
    const app = await createLockApp({ keyPrefix: prefix });
    const room = app.get(WaitingRoomService);
    const { passes } = roomKeys(prefix, 'early');
    const proto = RoomWatch.prototype as unknown as { onMessage(raw: string): void };
    const onMessage = proto.onMessage;
    let heard = false;
    const spy = jest.spyOn(proto, 'onMessage').mockImplementation(function (
      this: unknown,
      raw: string,
    ) {
      onMessage.call(this, raw);
      if (raw.includes('"early-v"')) heard = true;
    });
    try {
      await room.open('early', { admitPerSecond: 0, passTtlMs: 60_000 });
      const connection = app.get(RedisLockConnection);
      const run = connection.run.bind(connection);
      // The join is answered in Redis, then another instance admits the visitor, and only once
      // its own instance got the admission message is the join's reply read.
      jest.spyOn(connection, 'run').mockImplementation(async (script, keys, args) => {
        const reply = await run(script, keys, args);
        if (script === WAITING_ROOM_SCRIPTS.join) {
          await rooms[1].open('early', { admitPerSecond: 1_000, passTtlMs: 60_000 });
          await waitFor('the admission heard', () => heard);
        }
        return reply;
      });
      const status = await room.wait('early', 'early-v', { waitMs: 1_500 });
      expect(status).toMatchObject({ admitted: true, position: 0 });
      expect(await redis.zscore(passes, 'early-v')).not.toBeNull();
      expect(room.localWaiters('early')).toBe(0);
    } finally {
      spy.mockRestore();
      await app.close();
    }
  });

  it('a visitor admitted at once by wait leaves no parking behind; the next wait on its instance forgets the visitors admitted since', async () => {
    const settings = { passTtlMs: 60_000, absentMs: 3_000 };
    await rooms[0].open('bounded', { admitPerSecond: 1_000, ...settings });
    const { parkedBy, seen, settings: base } = roomKeys(prefix, 'bounded');
    const instance = (rooms[0] as unknown as { instance: string }).instance;
    const parkedz = `${base}:parkedz:${instance}`;
    const sizes = async () => [
      await redis.hlen(parkedBy),
      await redis.zcard(seen),
      await redis.zcard(parkedz),
    ];
    expect(await rooms[0].wait('bounded', 'at-once', { waitMs: 5_000 })).toMatchObject({
      admitted: true,
    });
    expect(await sizes()).toEqual([0, 0, 0]);
    // Parked, then admitted by a later call: left parked until the instance's next call.
    await rooms[0].open('bounded', { admitPerSecond: 0, ...settings });
    const waits = ['b1', 'b2', 'b3'].map((v) => rooms[0].wait('bounded', v, { waitMs: 5_000 }));
    await waitFor('3 parked visitors', () => rooms[0].localWaiters('bounded') === 3);
    await rooms[1].open('bounded', { admitPerSecond: 1_000, ...settings });
    await Promise.all(waits);
    expect(await sizes()).toEqual([3, 3, 3]);
    // The instance's waiters drained (no lease renewal): its next wait forgets them.
    expect(await rooms[0].wait('bounded', 'next', { waitMs: 5_000 })).toMatchObject({
      admitted: true,
    });
    expect(await sizes()).toEqual([0, 0, 0]);
  });

  it('a visitor waiting on two instances keeps its place when one of its waits ends; the other is admitted in its turn', async () => {
    await rooms[0].open('tabs', { admitPerSecond: 0, passTtlMs: 60_000, absentMs: 3_000 });
    const { parkedBy, seen, settings } = roomKeys(prefix, 'tabs');
    const [a, b] = [rooms[1], rooms[2]].map((r) => (r as unknown as { instance: string }).instance);
    const first = rooms[1].wait('tabs', 'v', { waitMs: 10_000 });
    await waitFor('v parked on one instance', () => rooms[1].localWaiters('tabs') === 1);
    const tab = new AbortController();
    const second = rooms[2]
      .wait('tabs', 'v', { waitMs: 10_000, signal: tab.signal })
      .catch((e: unknown) => e);
    await waitFor('v waiting on both', () => rooms[2].localWaiters('tabs') === 1);
    await waitFor(
      'v parked on both',
      async () => (await redis.zscore(`${settings}:parkedz:${b}`, 'v')) !== null,
    );
    tab.abort(new Error('tab closed'));
    expect(((await second) as Error).message).toBe('tab closed');
    await waitFor(
      'v unparked on the instance whose wait ended',
      async () => (await redis.zscore(`${settings}:parkedz:${b}`, 'v')) === null,
    );
    // Still parked by the instance where it waits: absentMs does not drop it.
    expect(await redis.hget(parkedBy, 'v')).toBe(a);
    expect(await redis.zscore(seen, 'v')).toBe('inf');
    await rooms[0].join('tabs', 'w');
    await rooms[0].open('tabs', { admitPerSecond: 1, passTtlMs: 60_000, absentMs: 3_000 });
    await expect(first).resolves.toMatchObject({ admitted: true });
    expect(await rooms[0].hasPass('tabs', 'w')).toBe(false);
  });

  it('admits above 2,500 a second at its rate: a call that admitted its most (1,000) is followed at once, not 400 ms later', async () => {
    const room = 'fast';
    const { channel } = roomKeys(prefix, room);
    await rooms[0].open(room, { admitPerSecond: 0, passTtlMs: 60_000 });
    const visitors = Array.from({ length: 3_000 }, (_, i) => `f${i}`);
    // Parked 500 at a time: 3,000 joins sent at once queue behind each other in the in-memory
    // backend's one Lua VM, and the last ones could outlast commandTimeoutMs on a loaded machine.
    const waits: Promise<unknown>[] = [];
    for (let from = 0; from < visitors.length; from += 500) {
      const chunk = visitors.slice(from, from + 500);
      waits.push(...chunk.map((v) => rooms[0].wait(room, v, { waitMs: 60_000 })));
      await waitFor(
        `${from + chunk.length} parked`,
        () => rooms[0].localWaiters(room) === from + chunk.length,
        20_000,
      );
    }
    const listener = redisClient();
    const batches: { size: number; t: number }[] = [];
    try {
      listener.on('message', (_channel: string, raw: string) => {
        const m = JSON.parse(raw) as { a: string[] | object; t: number };
        // Every admission, whoever's call made it (a timer's, a join's, a lease renewal's).
        if (Array.isArray(m.a) && m.a.length > 0) batches.push({ size: m.a.length, t: m.t });
      });
      await listener.subscribe(channel);
      // 3,000 are due 30 ms after the rate is set: three calls of 1,000 each.
      await rooms[0].open(room, { admitPerSecond: 100_000, passTtlMs: 60_000 });
      await Promise.all(waits);
      // At least one call found more than 1,000 due (the first timer call comes 400 ms after
      // the last one, by when all 3,000 are).
      const full = batches.filter((b, i) => b.size === 1_000 && i + 1 < batches.length);
      expect(full.length).toBeGreaterThanOrEqual(1);
      // On the Redis clock, the call after a full batch came at once (the gap is 400 ms).
      for (const b of full) {
        const next = batches[batches.indexOf(b) + 1];
        expect(next.t - b.t).toBeLessThan(300);
      }
    } finally {
      listener.disconnect();
    }
  }, 60_000);

  it('refuses bad input with typed errors naming it', async () => {
    await expect(rooms[0].join('never-opened', 'x')).rejects.toThrow(WaitingRoomNotOpenError);
    await expect(rooms[0].join('never-opened', 'x')).rejects.toThrow(/'never-opened' is not open/);
    const bad: Array<[unknown, string]> = [
      [{ admitPerSecond: -1, passTtlMs: 1 }, 'admitPerSecond'],
      [{ admitPerSecond: Number.NaN, passTtlMs: 1 }, 'admitPerSecond'],
      [{ admitPerSecond: '5', passTtlMs: 1 }, 'admitPerSecond'],
      [{ admitPerSecond: 100_001, passTtlMs: 1 }, 'admitPerSecond'],
      [{ admitPerSecond: 1, passTtlMs: 0 }, 'passTtlMs'],
      [{ admitPerSecond: 1, passTtlMs: 1, absentMs: 10 }, 'absentMs'],
      [{ admitPerSecond: 1, passTtlMs: 1, rate: 3 }, 'options.rate'],
    ];
    for (const [options, option] of bad) {
      const e = await rooms[0].open('bad', options as never).catch((x) => x);
      expect(e).toBeInstanceOf(RedisLockOptionsError);
      expect(e.option).toBe(option);
    }
    await expect(rooms[0].join('', 'x')).rejects.toThrow(LockKeyError);
    await expect(rooms[0].join('held', '')).rejects.toThrow(/visitor id must not be empty/);
    await expect(rooms[0].hasPass('held', 42 as never)).rejects.toThrow(LockKeyError);
    await expect(rooms[0].wait('held', 'ann', { waitMs: -1 })).rejects.toThrow(/'waitMs'/);
    expect(await redis.exists(roomKeys(prefix, 'bad').settings)).toBe(0);
  });

  it('refuses an admitPerSecond above 0 but under one per 24.8 days (its interval must fit a Node timer), naming it and the value', async () => {
    const expected = `0, or a number from ${1000 / 2_147_483_647} (one visitor per 24.8 days) to 100000`;
    for (const tiny of [1e-320, Number.MIN_VALUE, 1e-7, 4.6e-7]) {
      const e = await rooms[0]
        .open('tiny', { admitPerSecond: tiny, passTtlMs: 60_000 })
        .catch((x) => x);
      expect(e).toBeInstanceOf(RedisLockOptionsError);
      expect(e).toMatchObject({ option: 'admitPerSecond', value: tiny, expected });
      expect(e.message).toBe(`invalid option 'admitPerSecond': expected ${expected}, got ${tiny}`);
    }
    expect(await redis.exists(roomKeys(prefix, 'tiny').settings)).toBe(0);
    // The least rate itself: one visitor per 2,147,483,647 ms; the next one waits that long.
    await rooms[0].open('tiny', { admitPerSecond: 1000 / 2_147_483_647, passTtlMs: 60_000 });
    expect(await rooms[0].join('tiny', 'a')).toMatchObject({ admitted: true });
    const b = await rooms[1].join('tiny', 'b');
    expect(b).toMatchObject({ admitted: false, position: 1 });
    expect(b.etaMs).toBeGreaterThan(2_147_000_000);
    expect(b.etaMs).toBeLessThanOrEqual(2_147_483_647);
  });
});
