import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { currentTick, OncePerTick, RedisLockError, RedisLockOptionsError } from '../../lib';
import { taggedKey } from '../../lib/redis/tagged-key';
import { createLockApp, redisClient, redisTimeMs, uniquePrefix } from '../support/helpers';
import { Interval } from '../support/schedule-interval';
import { CronTime } from 'cron';
import { Cron } from 'croner';
import { tickPlan, type TickClaim } from '../../lib/schedule/tick-plan';

@Injectable()
class Jobs {
  ticks: number[] = [];

  // Never started by @nestjs/schedule here (no ScheduleModule): the test calls it by hand.
  @Interval(60_000)
  @OncePerTick({ name: 'minute', startLeaseMs: 200 })
  async minute(): Promise<string> {
    this.ticks.push(currentTick()!.tick);
    return 'ran';
  }

  @OncePerTick()
  async unscheduled(): Promise<void> {}
}

describe('@OncePerTick claims', () => {
  const prefix = uniquePrefix('tick-claims');
  let redis: Redis;
  let app: INestApplicationContext;
  let jobs: Jobs;
  const key = taggedKey(prefix, 'tick', 'minute');

  beforeAll(async () => {
    redis = redisClient();
    app = await createLockApp({ keyPrefix: prefix }, [Jobs]);
    jobs = app.get(Jobs);
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });
  beforeEach(async () => {
    jobs.ticks = [];
    await redis.del(key);
  });

  it('an interval window runs once: a second call in the same window resolves undefined', async () => {
    const window = Math.floor(((await redisTimeMs(redis)) + 1_000) / 60_000);
    await expect(jobs.minute()).resolves.toBe('ran');
    await expect(jobs.minute()).resolves.toBeUndefined();
    expect(jobs.ticks).toHaveLength(1);
    expect([window - 1, window]).toContain(jobs.ticks[0]);
    // Kept after the handler returned, until it lapses (4 windows and some).
    expect(await redis.hget(key, `t:${jobs.ticks[0]}`)).toMatch(/^r /);
    expect(await redis.pttl(key)).toBeGreaterThan(4 * 60_000);
  });

  it('takes over a window whose claimer never started it, once its start lease is over', async () => {
    const window = Math.floor(((await redisTimeMs(redis)) + 1_000) / 60_000);
    const leaseEnd = (await redisTimeMs(redis)) + 300;
    await redis.hset(key, 'last', window, `t:${window}`, `s dead-instance ${leaseEnd}`);
    await expect(jobs.minute()).resolves.toBe('ran');
    expect(jobs.ticks).toEqual([window]);
    expect(await redis.hget(key, `t:${window}`)).toMatch(/^r /);
  });

  it('a window started elsewhere is not run', async () => {
    const window = Math.floor(((await redisTimeMs(redis)) + 1_000) / 60_000);
    await redis.hset(key, 'last', window, `t:${window}`, 'r other-instance');
    await expect(jobs.minute()).resolves.toBeUndefined();
    expect(jobs.ticks).toEqual([]);
    expect(await redis.hget(key, `t:${window}`)).toBe('r other-instance');
  });

  it('a method without @Cron/@Interval/@Timeout is an error naming it', async () => {
    await expect(jobs.unscheduled()).rejects.toThrow(
      new RedisLockError(
        '@OncePerTick on Jobs.unscheduled: the method has no @Cron, @Interval or @Timeout (@nestjs/schedule)',
      ),
    );
  });

  it('the library never loads @nestjs/schedule (an optional peer)', () => {
    // A plain Node process (Jest has its own module registry): load the library, list what it loaded.
    const loaded = execFileSync(
      process.execPath,
      [
        '-r',
        'ts-node/register/transpile-only',
        '-e',
        "require('./lib'); console.log(Object.keys(require.cache).filter((p) => p.includes('@nestjs/schedule')).length, Object.keys(require.cache).some((p) => p.includes('croner')))",
      ],
      { cwd: resolve(__dirname, '..', '..'), encoding: 'utf8' },
    );
    expect(loaded.trim()).toBe('0 true');
  });

  it('rejects bad options naming the option', () => {
    expect(() => OncePerTick({ skewMs: -1 })).toThrow(RedisLockOptionsError);
    expect(() => OncePerTick({ skewMs: -1 })).toThrow(/skewMs/);
    expect(() => OncePerTick({ name: '' })).toThrow(/'name'/);
    // The name is part of a key written every tick: at most 512 bytes, as a lock's.
    expect(() => OncePerTick({ name: 'x'.repeat(513) })).toThrow(/'name'.*at most 512 bytes/);
    expect(() => OncePerTick({ name: 'é'.repeat(257) })).toThrow(RedisLockOptionsError);
    expect(() => OncePerTick({ name: 'x'.repeat(512) })).not.toThrow();
    expect(() => OncePerTick({ every: 1 } as never)).toThrow(/every/);
  });
});

describe('@OncePerTick on @Cron across DST days: the tick of each firing of @nestjs/schedule', () => {
  const settings = { skewMs: 2_000, startLeaseMs: 1_000, windowMs: 60_000 };
  /** What claim-tick.lua checks of a claim made at `nowMs` (the Redis clock the local one). */
  const accepted = (claim: TickClaim, nowMs: number) => Number(claim.tick) >= nowMs - claim.keepMs;

  // Four weeks around each zone's spring-forward day of 2027.
  it.each([
    ['Australia/Sydney', '0 30 2 * * *', '2027-09-20'],
    ['Australia/Adelaide', '0 15 2 * * *', '2027-09-20'],
    ['Pacific/Auckland', '0 30 2 * * *', '2027-09-13'],
    ['America/Santiago', '0 30 0 * * *', '2027-08-22'],
    ['Europe/Berlin', '0 30 2 * * *', '2027-03-14'],
    ['America/New_York', '0 30 2 * * *', '2027-03-01'],
  ])(
    '%s %s: every day from %s has its tick claimed by its firing',
    (timeZone, expression, start) => {
      const plan = tickPlan({ kind: 'cron', cronTime: expression, timeZone }, settings, 'Job.run');
      // The cron package (4.x, what @nestjs/schedule fires with) and croner (what names ticks).
      const firing = new CronTime(expression, timeZone);
      const ticks = new Cron(expression, { paused: true, timezone: timeZone });
      let from = new Date(`${start}T00:00:00Z`);
      const claimed = new Set<number>();
      let last = 0;
      for (let day = 0; day < 28; day++) {
        const at = firing.getNextDateFrom(from, timeZone).toMillis();
        from = new Date(at + 5);
        last = at;
        const claim = plan(at);
        if (accepted(claim, at)) claimed.add(Number(claim.tick));
      }
      const due = ticks
        .nextRuns(30, new Date(`${start}T00:00:00Z`))
        .map((d) => d.getTime())
        .filter((t) => t < last);
      // A spring-forward day's 02:30 that does not exist: croner names it 03:00, the cron package
      // fires at 03:30; refused as 30 min old, no instance ran the job that day.
      expect(due.filter((t) => !claimed.has(t)).map((t) => new Date(t).toISOString())).toEqual([]);
    },
  );

  it('keeps refusing a call an hour after a tick of an ordinary day', () => {
    const plan = tickPlan(
      { kind: 'cron', cronTime: '0 30 2 * * *', timeZone: 'Australia/Sydney' },
      settings,
      'Job.run',
    );
    const tick = Date.parse('2027-06-01T16:30:00Z'); // 02:30 in Sydney (AEST)
    expect(accepted(plan(tick), tick)).toBe(true);
    expect(accepted(plan(tick + 3_600_000), tick + 3_600_000)).toBe(false);
  });
});
