import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { ChildProcess } from 'node:child_process';
import type { Redis } from 'ioredis';
import { FencedStore, LockService, LockTimeoutError, type Lock } from '../../lib';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import { exited, lineFrom, spawnTs } from '../support/child';
import {
  commandCalls,
  createLockApp,
  redisClient,
  redisTimeMs,
  uniquePrefix,
  waitFor,
  waitForLine,
  waitForLocalWaiters,
  scriptsIn,
} from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/** One entry of the section log: the fence a section ran under and which process ran it. */
interface Section {
  fence: number;
  tag: string;
  at: number;
}

describe('LockService local cohorts', () => {
  // A server of its own, so that command counts are this file's alone.
  let server: RedisServer;
  let redis: Redis;
  let app: INestApplicationContext;
  let locks: LockService;

  beforeAll(async () => {
    server = await startRedisServer();
    redis = redisClient(server.url);
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });
  afterEach(async () => {
    await app?.close();
  });

  const start = async (prefix: string, extra: object = {}) => {
    app = await createLockApp({ redis: server.url, keyPrefix: prefix, ...extra });
    locks = app.get(LockService);
  };

  const child = (prefix: string, env: Record<string, string>): ChildProcess =>
    spawnTs('test/fixtures/cohort-child.ts', [], { REDIS_URL: server.url, PREFIX: prefix, ...env });

  const sectionLog = async (prefix: string): Promise<(Section | { want: string })[]> =>
    (await redis.lrange(`${prefix}log`, 0, -1)).map((line) => {
      const [a, b, c] = line.split(' ');
      return a === 'want' ? { want: b } : { fence: Number(a), tag: b, at: Number(c) };
    });

  it('a free key costs 6 Redis commands per acquire + release pair (4 + 2), nothing published', async () => {
    const prefix = uniquePrefix('cohort-fast');
    await start(prefix);
    await locks.release(await locks.acquire('warm'));
    // The counter is shared by the prefix's locks: gone, it is created again in the loop.
    await redis.del(lockRedisKeys(prefix, 'fast').fence);
    await redis.config('RESETSTAT');
    for (let i = 0; i < 10; i++) await (await locks.acquire('fast')).release();
    const calls = await commandCalls(redis);
    expect(scriptsIn(calls)).toBe(20);
    // acquire: EXISTS line, SET NX PX, TIME and SET of the fence (max(counter + 1, TIME µs),
    // fence-counter.lua); release: GET, DEL (a new counter also gets its PEXPIRE once).
    expect(calls.get('exists')).toBe(10);
    expect(calls.get('time')).toBe(10);
    expect(calls.get('set')).toBe(20);
    expect(calls.get('incr')).toBeUndefined();
    expect(calls.get('pexpire')).toBe(1);
    expect(calls.get('get')).toBe(10);
    expect(calls.get('del')).toBe(10);
    expect(calls.get('publish')).toBeUndefined();
  });

  it('4 processes x 32 callers: exact counter, no overlap, fences strictly increasing in the order sections ran', async () => {
    const prefix = uniquePrefix('cohort-crowd');
    const go = `${prefix}go`;
    const children = ['a', 'b', 'c', 'd'].map((tag) =>
      child(prefix, { TAG: tag, CALLERS: '32', SECTIONS: '4', MAX_LOCAL: '4', GO_KEY: go }),
    );
    // All four start together: on a loaded machine one process's start-up can take seconds,
    // long enough for another to run all of its sections alone.
    await Promise.all(children.map((c) => lineFrom(c, /^started$/, 60_000)));
    await redis.set(go, '1');
    const codes = await Promise.all(
      children.map(async (c) => {
        await lineFrom(c, /^done$/, 90_000);
        return exited(c);
      }),
    );
    expect(codes).toEqual([0, 0, 0, 0]);
    expect(Number(await redis.get(`${prefix}counter`))).toBe(4 * 32 * 4);
    expect(await redis.get(`${prefix}violations`)).toBeNull();
    const log = (await sectionLog(prefix)) as Section[];
    expect(log).toHaveLength(512);
    for (let i = 1; i < log.length; i++) expect(log[i].fence).toBeGreaterThan(log[i - 1].fence);
    // Every process had turns in between: the bypass bound keeps a process from running all
    // of its 128 sections in one go while the others wait.
    const runs: number[] = [];
    for (let i = 0, run = 1; i < log.length; i++, run++) {
      if (i === log.length - 1 || log[i + 1].tag !== log[i].tag) {
        runs.push(run);
        run = 0;
      }
    }
    expect(runs.length).toBeGreaterThan(4 * 8);
  }, 120_000);

  it('bounds the bypass: at most maxLocalHandoffs local handoffs in a row while another process waits', async () => {
    const prefix = uniquePrefix('cohort-bound');
    const { line } = lockRedisKeys(prefix, 'crowd');
    // Both started up front (start-up is slow on a loaded machine); the second one asks only
    // once told to, while the first surely runs sections.
    const once = child(prefix, { TAG: 'once', MODE: 'once', GO_KEY: `${prefix}go` });
    await lineFrom(once, /^started$/, 60_000);
    const busy = child(prefix, {
      TAG: 'busy',
      CALLERS: '16',
      SECTIONS: '4',
      SECTION_MS: '100',
      MAX_LOCAL: '3',
    });
    // Once the busy process runs sections, another process asks once; the moment its place is in
    // the Redis line (the busy process, holding, has none there) is marked in the section log.
    // Deadlines for child start-up only (ts-node compiles; slow on a loaded machine).
    await waitFor(
      'the busy process to run',
      async () => (await redis.llen(`${prefix}log`)) > 2,
      60_000,
    );
    await redis.set(`${prefix}go`, '1');
    await waitFor('its place in line', async () => (await redis.zcard(line)) === 1, 60_000, 2);
    await redis.rpush(`${prefix}log`, 'want joined');
    await lineFrom(once, /^done$/, 30_000);
    await lineFrom(busy, /^done$/, 60_000);
    await Promise.all([exited(once), exited(busy)]);
    const log = await sectionLog(prefix);
    const joined = log.findIndex((e) => 'want' in e && e.want === 'joined');
    const got = log.findIndex((e) => 'tag' in e && e.tag === 'once');
    expect(joined).toBeGreaterThan(0);
    expect(got).toBeGreaterThan(joined);
    // After it joined: at most 3 local handoffs (sections of the busy process), then its turn.
    // One more only if the mark came late, after a handoff had already started a section.
    const bypassed = log.slice(joined + 1, got).filter((e) => 'tag' in e).length;
    expect(bypassed).toBeGreaterThanOrEqual(1);
    expect(bypassed).toBeLessThanOrEqual(3 + 1);
    // The busy process queued again and finished after it.
    expect(log.slice(got + 1).some((e) => 'tag' in e && e.tag === 'busy')).toBe(true);
  }, 150_000);

  it('parked callers cost the renewal only: one call per second per process, whatever their number', async () => {
    const prefix = uniquePrefix('cohort-park');
    await start(prefix);
    const held = await locks.acquire('parked', { ttlMs: 120_000 });
    const parked = ['p1', 'p2'].map((tag) =>
      child(prefix, { TAG: tag, KEY: 'parked', MODE: 'park', CALLERS: '250' }),
    );
    await Promise.all(parked.map((c) => lineFrom(c, /^parked$/, 60_000)));
    // One entry per process in the Redis line, not one per caller.
    await waitForLine(redis, prefix, 'parked', 2, 10_000);
    await redis.config('RESETSTAT');
    const from = await redisTimeMs(redis);
    await waitFor(
      '3.5 s of parking',
      async () => (await redisTimeMs(redis)) - from >= 3_500,
      10_000,
    );
    const calls = await commandCalls(redis);
    const periods = Math.ceil(((await redisTimeMs(redis)) - from) / 1_000) + 1;
    // 500 parked callers: at most one renewal per process per second (our own polling of TIME
    // and the stats themselves aside), no attempt, no message.
    // (Twice that as room for a loaded machine, where a late renewal can let an entry lapse and
    // the process join again: still nothing per caller, which would be thousands of calls.)
    expect(scriptsIn(calls)).toBeLessThanOrEqual(2 * 2 * periods);
    expect(calls.get('hset') ?? 0).toBeLessThanOrEqual(2 * 2 * periods);
    expect(calls.get('publish')).toBeUndefined();
    const total = [...calls.entries()]
      .filter(([name]) => !['time', 'config', 'info'].includes(name))
      .reduce((sum, [, n]) => sum + n, 0);
    expect(total).toBeLessThanOrEqual(2 * 2 * periods * 8);
    // Then the line drains completely: every parked caller gets the lock once.
    await held.release();
    await Promise.all(parked.map((c) => lineFrom(c, /^acquired 250$/, 30_000)));
    await Promise.all(parked.map((c) => exited(c)));
    expect(await redis.exists(lockRedisKeys(prefix, 'parked').line)).toBe(0);
  }, 120_000);

  it('a SIGKILLed process, holding or waiting, does not stall the others beyond one TTL and entry deadline', async () => {
    const prefix = uniquePrefix('cohort-kill');
    const env = { CALLERS: '8', SECTIONS: '12', SECTION_MS: '5', TTL_MS: '1000', MAX_LOCAL: '4' };
    const go = `${prefix}go`;
    const victim = child(prefix, { ...env, TAG: 'victim', SECTIONS: '1000' });
    const others = ['s1', 's2'].map((tag) => child(prefix, { ...env, TAG: tag, GO_KEY: go }));
    const ran = (tags: RegExp) => async () =>
      (await redis.lrange(`${prefix}log`, 0, -1)).some((l) => tags.test(l));
    await waitFor('the victim to run sections', ran(/ victim /), 30_000);
    // The others start once the victim runs (a child that starts slowly on a loaded machine
    // must not find them done), and it is killed as soon as they contend with it.
    await Promise.all(others.map((c) => lineFrom(c, /^started$/, 60_000)));
    await redis.set(go, '1');
    await waitFor('a section of the others', ran(/ s[12] /), 30_000);
    victim.kill('SIGKILL');
    await exited(victim);
    const killedAt = Date.now();
    await Promise.all(others.map((c) => lineFrom(c, /^done$/, 100_000)));
    expect(await Promise.all(others.map((c) => exited(c)))).toEqual([0, 0]);
    const log = (await sectionLog(prefix)) as Section[];
    const after = log.filter((s) => s.at >= killedAt);
    // Sections went on after the kill; the longest pause is bounded by the victim's lock TTL
    // (1 s) plus its line entry's deadline (3 s), with room for a loaded machine.
    expect(after.length).toBeGreaterThan(0);
    let longest = after[0].at - killedAt;
    for (let i = 1; i < after.length; i++)
      longest = Math.max(longest, after[i].at - after[i - 1].at);
    expect(longest).toBeLessThan(1_000 + 3_000 + 2_000);
    // No lost update: every survivor section counted, plus the victim's (its last one may have
    // died between reading and writing the counter). The in/out marker cannot tell here: a
    // holder killed inside its section leaves it set.
    const victimSections = log.filter((s) => s.tag === 'victim').length;
    const counter = Number(await redis.get(`${prefix}counter`));
    expect(counter).toBeGreaterThanOrEqual(2 * 8 * 12 + victimSections - 1);
    expect(counter).toBeLessThanOrEqual(2 * 8 * 12 + victimSections);
  }, 150_000);

  it('a SIGSTOPped process loses its place once its entry deadline passed, and is not handed the lock while frozen', async () => {
    const prefix = uniquePrefix('cohort-stop');
    await start(prefix);
    const { value, line, entries } = lockRedisKeys(prefix, 'frozen');
    const held = await locks.acquire('frozen', { ttlMs: 60_000 });
    const frozen = child(prefix, { TAG: 'frozen', KEY: 'frozen', MODE: 'park', CALLERS: '3' });
    await lineFrom(frozen, /^parked$/, 60_000);
    await waitForLine(redis, prefix, 'frozen', 1, 10_000);
    const [frozenToken] = await redis.zrange(line, 0, 0);
    frozen.kill('SIGSTOP');
    try {
      const deadline = Number((await redis.hget(entries, frozenToken))!.split(':')[0]);
      await waitFor(
        'its entry deadline',
        async () => (await redisTimeMs(redis)) > deadline,
        10_000,
        20,
      );
      // Another instance asks now; the release skips the frozen entry and hands the lock on.
      const other = await createLockApp({ redis: server.url, keyPrefix: prefix });
      try {
        const next = other.get(LockService).acquire('frozen', { waitMs: 20_000 });
        // Its attempt took a place behind the frozen entry (a held lock's waiter reads nothing
        // in its line); the release skips that entry, whose deadline passed, and drops it.
        await waitFor('the other waiter in line', async () => {
          const tokens = await redis.zrange(line, 0, -1);
          return tokens.length === 2 && tokens[0] === frozenToken;
        });
        expect(await held.release()).toBe(true);
        const lock = await next;
        expect((await redis.get(value))?.replace(/\*$/, '')).toBe(lock.token);
        expect(await redis.zscore(line, frozenToken)).toBeNull();
        await lock.release();
      } finally {
        await other.close();
      }
      // Still frozen: the free lock was not handed to it.
      expect(await redis.exists(value)).toBe(0);
    } finally {
      frozen.kill('SIGCONT');
    }
    // Thawed, it finds its place gone, queues again, and its callers get the lock.
    await lineFrom(frozen, /^acquired 3$/, 20_000);
    await exited(frozen);
  }, 120_000);

  it('fence counters expire and come back above every fence they handed out; FencedStore keeps refusing the stale writer', async () => {
    const prefix = uniquePrefix('cohort-fence');
    await start(prefix, { fenceTtlMs: 1_000 });
    const fenced = app.get(FencedStore);
    const { fence } = lockRedisKeys(prefix, 'order:7');
    const first = await locks.acquire('order:7');
    await first.release();
    expect(await redis.pttl(fence)).toBeGreaterThan(0);
    expect(await fenced.write('row:7', first.fence, 'by first')).toBe(true);
    const second = await locks.acquire('order:7');
    await second.release();
    expect(second.fence).toBeGreaterThan(first.fence);
    await waitFor(
      'the fence counter to expire',
      async () => (await redis.exists(fence)) === 0,
      5_000,
    );
    const third = await locks.acquire('order:7');
    expect(third.fence).toBeGreaterThan(second.fence);
    expect(await fenced.write('row:7', third.fence, 'by third')).toBe(true);
    // The earlier holders come back late: refused, also across the counter's re-creation.
    expect(await fenced.write('row:7', second.fence, 'stale')).toBe(false);
    expect(await fenced.write('row:7', first.fence, 'stale')).toBe(false);
    // A counter lost any other way (deleted, a failover without it) behaves the same.
    await redis.del(fence);
    await third.release();
    const fourth = await locks.acquire('order:7');
    expect(fourth.fence).toBeGreaterThan(third.fence);
    await fourth.release();
    expect((await fenced.read('row:7'))?.value).toBe('by third');
  }, 30_000);

  it('shutdown tells waiting callers, leaves the line, and is never handed the lock afterwards', async () => {
    const prefix = uniquePrefix('cohort-close');
    await start(prefix);
    const { value, line } = lockRedisKeys(prefix, 'closing');
    const held = await locks.acquire('closing', { ttlMs: 30_000 });
    const leaving = await createLockApp({ redis: server.url, keyPrefix: prefix });
    const waiting = Array.from({ length: 5 }, () =>
      leaving
        .get(LockService)
        .acquire('closing', { waitMs: 60_000 })
        .then(
          () => 'granted',
          (err: Error) => err.name,
        ),
    );
    await waitForLine(redis, prefix, 'closing', 1);
    await leaving.close();
    expect(await Promise.all(waiting)).toEqual(new Array(5).fill('RedisUnavailableError'));
    expect(await redis.zcard(line)).toBe(0);
    // The holder's release finds nobody: the lock is free, not handed to the instance that left.
    expect(await held.release()).toBe(true);
    expect(await redis.exists(value)).toBe(0);
  });

  it('callers of one process wait locally: one place in the Redis line, served in arrival order', async () => {
    const prefix = uniquePrefix('cohort-local');
    await start(prefix);
    const other = await createLockApp({ redis: server.url, keyPrefix: prefix });
    try {
      const held = await other.get(LockService).acquire('local', { ttlMs: 30_000 });
      const order: number[] = [];
      const waiting = [1, 2, 3, 4, 5].map((i) =>
        locks.acquire('local', { waitMs: 20_000 }).then(async (lock) => {
          order.push(i);
          await lock.release();
        }),
      );
      await waitForLocalWaiters(locks, 'local', 5);
      await waitForLine(redis, prefix, 'local', 1);
      expect(await locks.tryAcquire('local')).toBeNull();
      await redis.config('RESETSTAT');
      await held.release();
      await Promise.all(waiting);
      expect(order).toEqual([1, 2, 3, 4, 5]);
      // One release (handoff to the process), four local handoffs, one final release.
      const calls = await commandCalls(redis);
      expect(scriptsIn(calls)).toBe(1 + 4 + 1);
      expect(calls.get('publish')).toBe(1);
    } finally {
      await other.close();
    }
  });

  it("a caller handed the lock after the local caller ahead of it gave up gets its own TTL and fence, not that caller's", async () => {
    const prefix = uniquePrefix('cohort-spec');
    await start(prefix);
    const { value } = lockRedisKeys(prefix, 'spec');
    const other = await createLockApp({ redis: server.url, keyPrefix: prefix });
    try {
      const held = await other.get(LockService).acquire('spec', { ttlMs: 30_000 });
      // The first local caller puts the process in the Redis line with its options, then gives
      // up; the entry still carries them when the release hands the lock to the process.
      const first = locks.acquire('spec', { ttlMs: 300, waitMs: 200, fencing: false });
      await waitForLine(redis, prefix, 'spec', 1);
      const second = locks.acquire('spec', { ttlMs: 20_000, waitMs: 10_000 });
      await waitForLocalWaiters(locks, 'spec', 2);
      await expect(first).rejects.toBeInstanceOf(LockTimeoutError);
      await held.release();
      const lock = await second;
      expect((await redis.get(value))?.replace(/\*$/, '')).toBe(lock.token);
      expect(await redis.pttl(value)).toBeGreaterThan(10_000);
      expect(lock.expiresAt - Date.now()).toBeGreaterThan(10_000);
      expect(lock.fence).toBeGreaterThan(held.fence);
      await lock.release();
    } finally {
      await other.close();
    }
  });

  it('a local holder that lets its lock run out stops holding up the callers behind it at its TTL, also after a local handoff', async () => {
    const prefix = uniquePrefix('cohort-lapse');
    await start(prefix);
    const held = (locks as unknown as { held: Iterable<Lock> }).held;
    // The first holder, with a caller waiting behind it, passes the lock on locally.
    const first = await locks.acquire('lapse', { ttlMs: 30_000 });
    const second = locks.acquire('lapse', { waitMs: 10_000, ttlMs: 300 });
    await waitForLocalWaiters(locks, 'lapse', 1);
    await first.release();
    // Its receiver never releases. The next caller gets the lock once that TTL ran out, through
    // the cohort's watch of its holder: the sweep of locks that ran out (every 5 s), which would
    // also free it, has not dropped the lapsed lock from what the instance holds.
    const lapsed = await second;
    const third = await locks.acquire('lapse', { waitMs: 4_000 });
    expect([...held]).toContain(lapsed);
    await third.release();
  });

  it('a wake-up crossing the message that hands the lock over: the process takes it once and stays out of the line while it holds', async () => {
    // A wake-up (the retry timer, a 'w'/'f' message) makes the waiting process check the line
    // again; when the handoff message comes while that check is in flight, the process holds the
    // lock and passes it on locally before the check's reply. That reply must not count as the
    // end of everything in flight: the process would join the line a second time while it holds
    // the lock, and a later rejoin would leave that entry behind, to be handed a lock that
    // nobody releases until its TTL (found in the bench's parked shape).
    const prefix = uniquePrefix('cohort-cross');
    await start(prefix, { maxLocalHandoffs: 2 });
    const { value, line, channel } = lockRedisKeys(prefix, 'cross');
    const holder = await createLockApp({ redis: server.url, keyPrefix: prefix });
    const third = await createLockApp({ redis: server.url, keyPrefix: prefix });
    try {
      for (let round = 0; round < 5; round++) {
        const held = await holder.get(LockService).acquire('cross', { ttlMs: 30_000 });
        const run = (service: LockService, n: number) =>
          Array.from({ length: n }, () =>
            service.acquire('cross', { waitMs: 10_000, ttlMs: 30_000 }).then(
              (lock) => lock.release().then(() => 'granted'),
              (err: Error) => err.name,
            ),
          );
        const mine = run(locks, 6);
        // All six wait here (the first one too, once its attempt was refused or, while the
        // instance is still subscribed from the round before, from the start).
        await waitForLocalWaiters(locks, 'cross', 6);
        await waitForLine(redis, prefix, 'cross', 1);
        const theirs = run(third.get(LockService), 6);
        await waitForLine(redis, prefix, 'cross', 2);
        // The wake-up reaches the waiting processes just before the release's handoff message.
        await Promise.all([redis.publish(channel, 'f'), held.release()]);
        expect(await Promise.all([...mine, ...theirs])).toEqual(new Array(12).fill('granted'));
        await waitFor('the line to empty', async () => (await redis.exists(line, value)) === 0);
      }
    } finally {
      await Promise.all([holder.close(), third.close()]);
    }
  }, 60_000);
});
