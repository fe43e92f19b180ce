import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { WaitingRoomService } from '../../lib';
import {
  commandCalls,
  createLockApp,
  scriptCalls,
  uniquePrefix,
  waitFor,
  scriptsIn,
} from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';
import { admissionTimes, inversions, joinInTurn, roomKeys } from './support';

/** Commands run on the server (every kind, scripts' own included) since the last RESETSTAT. */
async function totalCalls(redis: Redis): Promise<number> {
  let total = 0;
  for (const [command, n] of await commandCalls(redis))
    if (command !== 'info' && command !== 'config|resetstat') total += n;
  return total;
}

describe('WaitingRoomService: what parked visitors cost (dedicated redis-server)', () => {
  const prefix = uniquePrefix('room-cost');
  let server: RedisServer;
  let apps: INestApplicationContext[];
  let rooms: WaitingRoomService[];
  let own: Redis;

  beforeAll(async () => {
    // Other test files share the suite's server: its commandstats would count their calls too.
    server = await startRedisServer();
    apps = await Promise.all(
      [0, 1].map(() => createLockApp({ redis: server.url, keyPrefix: prefix })),
    );
    rooms = apps.map((app) => app.get(WaitingRoomService));
    own = new Redis(server.url);
  });
  afterAll(async () => {
    own.disconnect();
    await Promise.all(apps.map((app) => app.close()));
    await server.stop();
  });

  it('300 visitors parked on 2 instances: no call per visitor while they wait, about one script call per admission', async () => {
    const passTtlMs = 60_000;
    await rooms[0].open('cost', { admitPerSecond: 0, passTtlMs });
    const visitors = Array.from({ length: 300 }, (_, i) => `v${i}`);
    // Joined one after the other (concurrent joins from two instances would interleave at random).
    await joinInTurn(rooms, 'cost', visitors);
    const admitted: string[] = [];
    const waits = visitors.map((v, i) =>
      rooms[i % 2].wait('cost', v, { waitMs: 60_000 }).then(() => admitted.push(v)),
    );
    await waitFor(
      '300 parked visitors',
      () => rooms[0].localWaiters('cost') + rooms[1].localWaiters('cost') === 300,
    );
    await own.config('RESETSTAT');
    // Held: the parked visitors cost nothing.
    await new Promise((r) => setTimeout(r, 500));
    expect(await totalCalls(own)).toBe(0);
    // 20 a second: every admission is one script call (an instance's timer), and its PUBLISH.
    await rooms[1].open('cost', { admitPerSecond: 20, passTtlMs });
    await waitFor('20 visitors admitted', () => admitted.length >= 20, 10_000);
    const calls = await commandCalls(own);
    const scripts = scriptsIn(calls);
    const done = admitted.length;
    // The open call, then at most one call per admission and a few that found nobody due yet.
    expect(scripts).toBeLessThanOrEqual(1 + done + 3);
    expect(scripts).toBeLessThan(visitors.length / 10);
    expect(calls.get('publish') ?? 0).toBeLessThanOrEqual(1 + done);
    await rooms[0].open('cost', { admitPerSecond: 100_000, passTtlMs });
    await Promise.all(waits);
    // In join order, by Redis.
    const times = await admissionTimes(own, prefix, 'cost', visitors, passTtlMs);
    expect(inversions(times as number[])).toBe(0);
  });

  it('admitting 100/s to 300 visitors parked on 2 instances: a few commands per admission call, none per admitted visitor', async () => {
    const passTtlMs = 60_000;
    await rooms[0].open('batch', { admitPerSecond: 0, passTtlMs });
    const visitors = Array.from({ length: 300 }, (_, i) => `b${i}`);
    await joinInTurn(rooms, 'batch', visitors);
    let admitted = 0;
    const waits = visitors.map((v, i) =>
      rooms[i % 2].wait('batch', v, { waitMs: 60_000 }).then(() => admitted++),
    );
    await waitFor(
      '300 parked visitors',
      () => rooms[0].localWaiters('batch') + rooms[1].localWaiters('batch') === 300,
    );
    await rooms[1].open('batch', { admitPerSecond: 100, passTtlMs });
    await own.config('RESETSTAT');
    // Calls of the admission timers only (lease renewals come every absentMs / 3 = 20 s).
    await waitFor('200 visitors admitted', () => admitted >= 200, 20_000);
    const calls = await commandCalls(own);
    // The channel of the first test's room, left by its instances meanwhile, is not this room's.
    const total =
      (await totalCalls(own)) - (calls.get('unsubscribe') ?? 0) - (calls.get('sunsubscribe') ?? 0);
    const inRedis = await own.zcard(roomKeys(prefix, 'batch').passes);
    const scripts = scriptsIn(calls);
    const admissions = calls.get('publish') ?? 0;
    // An admission call: the script, HMGET of the settings, TIME, ZPOPMIN, ZADD of the passes,
    // HSET of the clock, PUBLISH; a trim of the expired passes now and then (ZREMRANGEBYSCORE,
    // PTTL, PEXPIRE: at most one per 5 s); a call that found nobody due: the script, HMGET, TIME.
    // Nothing per admitted visitor: the parked ones are forgotten by their instance's next lease
    // renewal, in one go.
    const trims = calls.get('pttl') ?? 0;
    expect(total).toBeLessThanOrEqual(7 * admissions + 3 * (scripts - admissions) + 3 * trims);
    for (const perVisitor of ['hdel', 'zrem', 'srem']) expect(calls.get(perVisitor) ?? 0).toBe(0);
    // One HMGET per call: the settings (none of the admitted visitors' parking).
    expect(calls.get('hmget') ?? 0).toBeLessThanOrEqual(scripts);
    // Batches of about 100/s x the 400 ms between calls: well under one command per admission.
    expect(total / inRedis).toBeLessThan(0.5);
    await rooms[0].open('batch', { admitPerSecond: 100_000, passTtlMs });
    await Promise.all(waits);
  });

  it('a visitor whose turn is more than 24.8 days away (the longest Node timer) costs no call while it waits', async () => {
    // One visitor every 10^9 ms (11.6 days): 'a' goes in at once, 'd' is 3 intervals away.
    await rooms[0].open('far', { admitPerSecond: 1e-6, passTtlMs: 60_000 });
    expect(await rooms[0].join('far', 'a')).toMatchObject({ admitted: true });
    await joinInTurn(rooms, 'far', ['b', 'c']);
    const controller = new AbortController();
    const far = rooms[1]
      .wait('far', 'd', { waitMs: 60_000, signal: controller.signal })
      .catch((e) => e);
    await waitFor('a parked visitor', () => rooms[1].localWaiters('far') === 1);
    expect((await rooms[0].join('far', 'd')).etaMs).toBeGreaterThan(2_147_483_647);
    await own.config('RESETSTAT');
    // Its instance's timer waits 24.8 days, not 1 ms over and over (what Node does with a delay
    // it cannot keep); the lease renewal comes every absentMs / 3 = 20 s.
    await new Promise((r) => setTimeout(r, 300));
    expect(await scriptCalls(own)).toBe(0);
    expect(rooms[1].localWaiters('far')).toBe(1);
    controller.abort(new Error('done'));
    expect((await far).message).toBe('done');
  });
});
