import 'reflect-metadata';
import type { ChildProcess } from 'node:child_process';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { QueueError, QueueService } from '../../lib';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { scheduleIndexKey, scheduleRedisKeys } from '../../lib/queue/schedule/schedule-keys';
import { QUEUE_SCHEDULE_SCRIPTS } from '../../lib/queue/schedule/schedule-scripts';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import type { RedactingLogger } from '../../lib/redaction/redacting-logger';
import { QueueScheduler } from '../../lib/queue/schedule/queue-scheduler';
import * as ticksModule from '../../lib/queue/schedule/schedule-ticks';
import { scheduleTicks } from '../../lib/queue/schedule/schedule-ticks';
import { exited, lineFrom, spawnTs } from '../support/child';
import {
  createLockApp,
  redisClient,
  redisTimeMs,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';

/** The tick times of the tasks of schedule `id` among `ids` (task id `<id>:<tick>`), sorted. */
function ticksOf(ids: string[], id: string): number[] {
  return ids
    .filter((taskId) => taskId.startsWith(`${id}:`))
    .map((taskId) => Number(taskId.slice(id.length + 1)))
    .sort((a, b) => a - b);
}

/** Differences between consecutive values. */
const gaps = (ticks: number[]) => ticks.slice(1).map((t, i) => t - ticks[i]);

/** The private parts of an app's scheduler the tests look at. */
interface SchedulerInside {
  timers: Map<string, Map<string, NodeJS.Timeout>>;
  sync(): Promise<void>;
}
const schedulerOf = (app: INestApplicationContext) =>
  (app.get(QueueService) as unknown as { scheduler: SchedulerInside }).scheduler;

describe('Queue schedules', () => {
  let redis: Redis;

  beforeAll(() => {
    redis = redisClient();
  });
  afterAll(() => redis.disconnect());

  it('3 instances upserting the same schedules: each tick processed exactly once; an upsert changes the interval without a double tick; unschedule stops them', async () => {
    const prefix = uniquePrefix('queue-schedule');
    const queue = 'scheduled';
    const env = { REDIS_URL: testRedisUrl(), PREFIX: prefix, QUEUE: queue };
    const children: ChildProcess[] = [0, 1, 2].map(() =>
      spawnTs('test/fixtures/queue-schedule-child.ts', [], env),
    );
    const ready = Promise.all(children.map((c) => lineFrom(c, /^ready$/, 60_000)));
    const app = await createLockApp({ keyPrefix: prefix });
    try {
      const queues = app.get(QueueService);
      await ready;
      const schedules = await queues.schedules(queue);
      expect(schedules.map((s) => s.id).sort()).toEqual(['cron', 'every']);
      expect(schedules.find((s) => s.id === 'cron')).toMatchObject({
        cron: '* * * * * *',
        tz: 'Asia/Kolkata',
        payload: { kind: 'cron' },
      });

      const ran = async () => Object.keys(await redis.hgetall(`${prefix}obs:runs`));
      const atLeast = (id: string, n: number, after = 0) =>
        waitFor(
          `${n} ticks of '${id}'`,
          async () => ticksOf(await ran(), id).filter((t) => t > after).length >= n,
          20_000,
          20,
        );
      await atLeast('every', 15);
      await atLeast('cron', 3);

      const changed = await queues.schedule(queue, 'every', { everyMs: 300 });
      const upsertedAt = await redisTimeMs(redis);
      expect(changed.everyMs).toBe(300);
      await atLeast('every', 8, upsertedAt);

      expect(await queues.unschedule(queue, 'every')).toBe(true);
      expect(await queues.unschedule(queue, 'cron')).toBe(true);
      expect(await queues.unschedule(queue, 'cron')).toBe(false);
      const unscheduledAt = await redisTimeMs(redis);
      expect(await queues.schedules(queue)).toEqual([]);
      // Several periods of both schedules pass on the Redis clock, and the queue drains.
      await waitFor(
        'two seconds after unschedule, an empty queue',
        async () => {
          const { ready, delayed, leased } = await queues.stats(queue);
          return (
            (await redisTimeMs(redis)) > unscheduledAt + 2_000 && ready + delayed + leased === 0
          );
        },
        20_000,
        50,
      );
      for (const child of children) child.kill('SIGTERM');
      await Promise.all(children.map(exited));

      const runs = await redis.hgetall(`${prefix}obs:runs`);
      expect(Object.entries(runs).filter(([, n]) => n !== '1')).toEqual([]);
      const ids = Object.keys(runs);
      const every = ticksOf(ids, 'every');
      const before = every.filter((t) => t <= upsertedAt);
      const after = every.filter((t) => t > upsertedAt);
      // Every tick of each grid, none missing, none doubled around the change.
      expect(new Set(gaps(before))).toEqual(new Set([200]));
      expect(new Set(gaps(after))).toEqual(new Set([300]));
      expect(after[0] - before[before.length - 1]).toBeGreaterThanOrEqual(200);
      const cron = ticksOf(ids, 'cron');
      expect(new Set(gaps(cron))).toEqual(new Set([1_000]));
      expect(cron.every((t) => t % 1_000 === 0)).toBe(true);
      // Nothing was enqueued after unschedule.
      expect(Math.max(...every, ...cron)).toBeLessThanOrEqual(unscheduledAt);
      const payloads = await redis.hgetall(`${prefix}obs:payloads`);
      expect(payloads[`cron:${cron[0]}`]).toBe('{"kind":"cron"}');
      expect(payloads[`every:${every[0]}`]).toBe('null');
      expect((await queues.stats(queue)).dead).toBe(0);
    } finally {
      await app.close();
    }
  }, 150_000);

  it('an instance that missed a re-create (unschedule, then schedule) cannot fire the removed definition', async () => {
    const prefix = uniquePrefix('queue-schedule-recreate');
    const queue = 'recreated';
    const a = await createLockApp({ keyPrefix: prefix });
    const b = await createLockApp({ keyPrefix: prefix });
    try {
      const qa = a.get(QueueService);
      const scheduler = (b.get(QueueService) as unknown as { schedulerOf: object }).schedulerOf;
      const armed = scheduler as unknown as { timers: Map<string, unknown> };
      await qa.schedule(queue, 'job', { everyMs: 200, payload: 'old' });
      await waitFor('b fires the schedule', () => armed.timers.has(queue), 10_000, 10);
      // b misses every announcement from here on (a lost pub/sub message, until its re-read).
      jest.spyOn(scheduler as never, 'refresh').mockResolvedValue([] as never);
      expect(await qa.unschedule(queue, 'job')).toBe(true);
      await qa.schedule(queue, 'job', { everyMs: 200, payload: 'new' });
      const recreatedAt = await redisTimeMs(redis);
      const after = async () =>
        (await qa.list<string>(queue, 'ready', { limit: 1_000 })).filter(
          (t) => ticksOf([t.id], 'job')[0] > recreatedAt,
        );
      // b's timer of the old definition fired meanwhile (every 200 ms).
      await waitFor('3 ticks after the re-create', async () => (await after()).length >= 3, 10_000);
      expect((await after()).filter((t) => t.payload !== 'new')).toEqual([]);
    } finally {
      await b.close();
      await a.close();
    }
  });

  it('after downtime, only the latest missed tick is enqueued, then the schedule goes on', async () => {
    const prefix = uniquePrefix('queue-schedule-missed');
    const queue = 'missed';
    const due = queueRedisKeys(prefix, queue).due;
    const first = await createLockApp({ keyPrefix: prefix });
    await first.get(QueueService).schedule(queue, 'm', { everyMs: 100 });
    await waitFor('two ticks', async () => (await redis.zcard(due)) >= 2, 10_000, 10);
    await first.close();
    const before = ticksOf(await redis.zrange(due, 0, -1), 'm');
    const last = before[before.length - 1];

    // No instance runs for ten ticks.
    await waitFor(
      'ten missed ticks',
      async () => (await redisTimeMs(redis)) > last + 1_000,
      10_000,
      20,
    );
    const restartedAt = await redisTimeMs(redis);
    let second: INestApplicationContext | undefined;
    try {
      second = await createLockApp({ keyPrefix: prefix });
      await waitFor(
        'two more ticks',
        async () => (await redis.zcard(due)) >= before.length + 2,
        10_000,
        10,
      );
    } finally {
      await second?.close();
    }
    const later = ticksOf(await redis.zrange(due, 0, -1), 'm').filter((t) => t > last);
    // The ticks missed before the restart are skipped; the latest one runs once, then every 100 ms.
    expect(later[0]).toBeGreaterThan(restartedAt - 100);
    expect(later.filter((t) => t <= restartedAt)).toHaveLength(later[0] <= restartedAt ? 1 : 0);
    expect(new Set(gaps(later))).toEqual(new Set([100]));
    expect((later[0] - last) % 100).toBe(0);
  }, 30_000);

  it("a task enqueued under a tick's id is not overwritten by the tick: it keeps its priority and stays one task", async () => {
    const prefix = uniquePrefix('queue-schedule-taken');
    const queue = 'taken';
    const app = await createLockApp({ keyPrefix: prefix });
    try {
      const queues = app.get(QueueService);
      const startAt = (await redisTimeMs(redis)) + 200;
      const id = `s:${startAt}`;
      await queues.enqueue(queue, id, { priority: 5, payload: 'mine' });
      await queues.schedule(queue, 's', { everyMs: 60_000, startAt, payload: 'tick' });
      const { state } = scheduleRedisKeys(prefix, queue);
      await waitFor('the tick fired', async () => (await redis.hget(state, 's')) !== null, 10_000);
      expect(await queues.get(queue, id)).toMatchObject({ priority: 5, payload: 'mine' });
      expect((await queues.stats(queue)).ready).toBe(1);
      expect(await redis.zscore(queueRedisKeys(prefix, queue).due, id)).toBeNull();
    } finally {
      await app.close();
    }
  });

  it("a dead task under a tick's id is enqueued again by the tick as a new task: its options, progress and log are forgotten", async () => {
    const prefix = uniquePrefix('queue-schedule-dead');
    const queue = 'reborn';
    const app = await createLockApp({ keyPrefix: prefix });
    try {
      const queues = app.get(QueueService);
      const startAt = (await redisTimeMs(redis)) + 1_000;
      const id = `s:${startAt}`;
      await queues.enqueue(queue, id, { maxAttempts: 1, expiresAt: Date.now() + 60_000 });
      const failing = queues.process(queue, async (task) => {
        await task.progress(50);
        await task.log('the old run');
        throw new Error('the old failure');
      });
      await waitFor('the task died', async () => (await queues.stats(queue)).dead === 1);
      await failing.close();
      await queues.schedule(queue, 's', { everyMs: 60_000, startAt, payload: 'tick' });
      const { state } = scheduleRedisKeys(prefix, queue);
      await waitFor('the tick fired', async () => (await redis.hget(state, 's')) !== null, 10_000);
      const task = await queues.get(queue, id);
      expect(task).toMatchObject({ state: 'ready', payload: 'tick', attempts: 0 });
      expect(task?.progress).toBeUndefined();
      expect(task?.lastError).toBeUndefined();
      expect(await queues.logs(queue, id)).toEqual([]);
      // Its own options (maxAttempts, expiresAt) are gone with the old run.
      const k = queueRedisKeys(prefix, queue);
      expect(await redis.hexists(k.opts, id)).toBe(0);
      expect(await redis.zscore(k.expiries, id)).toBeNull();
      const ran: string[] = [];
      const worker = queues.process(queue, async (t) => void ran.push(t.id));
      await waitFor('the tick task ran', async () => (await queues.stats(queue)).completed === 1);
      await worker.close();
      expect(ran).toEqual([id]);
      await queues.unschedule(queue, 's');
    } finally {
      await app.close();
    }
  });

  it("a schedule added while another instance removes the queue's last one stays in the index a restarted instance reads", async () => {
    const prefix = uniquePrefix('queue-schedule-race');
    const [a, b] = [
      await createLockApp({ keyPrefix: prefix }),
      await createLockApp({ keyPrefix: prefix }),
    ];
    try {
      await b.get(QueueService).schedule('jobs', 'old', { everyMs: 60_000 });
      // Instance a's schedule is held between its index write and its store until b's
      // unschedule (which takes the queue out of the index and finds no schedule left) is done.
      let open!: () => void;
      const gate = new Promise<void>((resolve) => (open = resolve));
      const connection = a.get(RedisLockConnection);
      const run = connection.run.bind(connection);
      jest
        .spyOn(connection, 'run')
        .mockImplementation((script, keys, args) =>
          script === QUEUE_SCHEDULE_SCRIPTS.upsert
            ? gate.then(() => run(script, keys, args))
            : run(script, keys, args),
        );
      const adding = a.get(QueueService).schedule('jobs', 'new', { everyMs: 60_000 });
      const index = scheduleIndexKey(prefix);
      await waitFor(
        'a indexed the queue',
        async () => (await redis.sismember(index, 'jobs')) === 1,
      );
      expect(await b.get(QueueService).unschedule('jobs', 'old')).toBe(true);
      expect(await redis.sismember(index, 'jobs')).toBe(0);
      open();
      await adding;
      expect((await b.get(QueueService).schedules('jobs')).map((s) => s.id)).toEqual(['new']);
      // A restarted instance finds its schedules through the index only.
      expect(await redis.smembers(index)).toEqual(['jobs']);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('deletes a schedule once it enqueued its last task (limit reached, last tick before endAt); its tasks stay, the queue leaves the index', async () => {
    const prefix = uniquePrefix('queue-schedule-ended');
    const app = await createLockApp({ keyPrefix: prefix });
    try {
      const queues = app.get(QueueService);
      const startAt = (await redisTimeMs(redis)) + 50;
      await queues.schedule('ended', 'limited', { everyMs: 50, startAt, limit: 3 });
      await queues.schedule('ended', 'until', { everyMs: 50, startAt, endAt: startAt + 100 });
      await queues.schedule('kept', 'open', { everyMs: 60_000 });
      await waitFor('both ended', async () => (await queues.schedules('ended')).length === 0);
      const k = scheduleRedisKeys(prefix, 'ended');
      expect(await redis.exists(k.definitions, k.state)).toBe(0);
      await waitFor(
        "'ended' out of the index",
        async () => (await redis.smembers(scheduleIndexKey(prefix))).join() === 'kept',
      );
      const ids = await redis.zrange(queueRedisKeys(prefix, 'ended').due, 0, -1);
      expect(ids.filter((id) => id.startsWith('limited:'))).toHaveLength(3);
      expect(ids).toContain(`until:${startAt + 100}`);
      expect((await queues.schedules('kept')).map((s) => s.id)).toEqual(['open']);
    } finally {
      await app.close();
    }
  });

  it('names its tasks when given a name: the named handler runs every tick (none buried as unknown), get and schedules() show the name', async () => {
    const prefix = uniquePrefix('queue-schedule-named');
    const app = await createLockApp({ keyPrefix: prefix });
    try {
      const queues = app.get(QueueService);
      const ran: string[] = [];
      const worker = queues.process(
        'reports',
        async (task) => void ran.push(`${task.name}:${task.id}`),
        { name: 'daily' },
      );
      const startAt = (await redisTimeMs(redis)) + 50;
      const schedule = { everyMs: 50, startAt, limit: 2, name: 'daily' };
      expect(await queues.schedule('reports', 'd', schedule)).toMatchObject({ name: 'daily' });
      expect(await queues.schedules('reports')).toMatchObject([{ id: 'd', name: 'daily' }]);
      await waitFor('two ticks run', () => ran.length === 2);
      await worker.close();
      expect(ran.every((r) => r.startsWith('daily:d:'))).toBe(true);
      expect(await queues.get('reports', ran[0].slice('daily:'.length))).toMatchObject({
        name: 'daily',
      });
      expect((await queues.stats('reports')).dead).toBe(0);
    } finally {
      await app.close();
    }
  });

  it('skips the ticks of a full queue (maxSize) without counting them, and enqueues again once there is room', async () => {
    const prefix = uniquePrefix('queue-schedule-full');
    const app = await createLockApp({ keyPrefix: prefix });
    try {
      const queues = app.get(QueueService);
      await queues.setMaxSize('full', 2);
      await queues.enqueue('full', ['a', 'b']);
      const startAt = (await redisTimeMs(redis)) + 100;
      await queues.schedule('full', 'tick', { everyMs: 100, startAt });
      const { state } = scheduleRedisKeys(prefix, 'full');
      // Five ticks have come and gone: none was enqueued, none counted.
      await waitFor(
        'five ticks',
        async () => Number((await redis.hget(state, 'tick'))?.split(' ')[0] ?? 0) >= startAt + 400,
        10_000,
      );
      expect((await queues.stats('full')).ready).toBe(2);
      expect((await redis.hget(state, 'tick'))?.split(' ')[1]).toBe('0');
      // Room again: the next tick is enqueued.
      await queues.remove('full', 'a');
      await waitFor(
        'a tick enqueued',
        async () => (await queues.stats('full')).ready === 2,
        10_000,
      );
      expect((await queues.schedules('full'))[0].count).toBeGreaterThanOrEqual(1);
      await queues.unschedule('full', 'tick');
    } finally {
      await app.close();
    }
  });

  it("a schedule croner cannot compute (stored by an older version) is listed without nextTick; the queue's other schedules fire", async () => {
    const prefix = uniquePrefix('queue-schedule-poisoned');
    const k = scheduleRedisKeys(prefix, 'jobs');
    // As versions that did not check startAt against croner stored it: every read of the queue
    // threw, and its other schedules were armed on no instance.
    const far = 8_640_000_000_000_000;
    const spec = JSON.stringify({ cron: '* * * * *', startAt: far });
    await redis.hset(k.definitions, 'far', JSON.stringify({ spec, rev: 1, anchor: far }));
    await redis.sadd(scheduleIndexKey(prefix), 'jobs');
    const app = await createLockApp({ keyPrefix: prefix });
    try {
      const queues = app.get(QueueService);
      const startAt = (await redisTimeMs(redis)) + 50;
      const every = await queues.schedule('jobs', 'every', { everyMs: 50, startAt, limit: 3 });
      expect(every).toMatchObject({ id: 'every', nextTick: startAt });
      const far = (await queues.schedules('jobs')).find((s) => s.id === 'far');
      expect(far).toMatchObject({ id: 'far', count: 0 });
      expect(far?.nextTick).toBeUndefined();
      await waitFor('every enqueued its 3 ticks', async () => {
        const ids = await redis.zrange(queueRedisKeys(prefix, 'jobs').due, 0, -1);
        return ticksOf(ids, 'every').length === 3;
      });
      expect((await queues.schedules('jobs')).map((s) => s.id)).toEqual(['far']);
    } finally {
      await app.close();
    }
  });

  it('schedule() returns the schedule it stored even when another instance fired its last tick and deleted it before the call ended', async () => {
    const prefix = uniquePrefix('queue-schedule-gone');
    const app = await createLockApp({ keyPrefix: prefix });
    try {
      const connection = app.get(RedisLockConnection);
      const run = connection.run.bind(connection);
      const k = scheduleRedisKeys(prefix, 'q');
      // Another instance fires its only tick right after the upsert: the schedule is deleted.
      jest.spyOn(connection, 'run').mockImplementation(async (script, keys, args) => {
        const reply = await run(script, keys, args);
        if (script === QUEUE_SCHEDULE_SCRIPTS.upsert) await redis.hdel(k.definitions, 's');
        return reply;
      });
      const startAt = (await redisTimeMs(redis)) + 60_000;
      const s = await app.get(QueueService).schedule('q', 's', { everyMs: 100, startAt, limit: 1 });
      expect(s).toMatchObject({ queue: 'q', id: 's', everyMs: 100, startAt, limit: 1, count: 0 });
    } finally {
      await app.close();
    }
  });

  it('deletes at once a schedule with no tick left (endAt before its first tick, a limit lowered to its count); the queue leaves the index', async () => {
    const prefix = uniquePrefix('queue-schedule-no-tick');
    const app = await createLockApp({ keyPrefix: prefix });
    try {
      const queues = app.get(QueueService);
      const now = await redisTimeMs(redis);
      const past = await queues.schedule('none', 'past', { everyMs: 1_000, endAt: now - 1 });
      expect(past).toMatchObject({ id: 'past', count: 0 });
      expect(past.nextTick).toBeUndefined();
      // Its first tick is its default startAt (now + everyMs), after endAt.
      const early = await queues.schedule('none', 'early', { everyMs: 1_000, endAt: now + 500 });
      expect(early.nextTick).toBeUndefined();
      expect(await queues.schedules('none')).toEqual([]);

      const startAt = now + 50;
      await queues.schedule('none', 'lim', { everyMs: 200, startAt, limit: 5 });
      await waitFor('two ticks', async () => (await queues.schedules('none'))[0]?.count >= 2);
      const lowered = await queues.schedule('none', 'lim', { everyMs: 200, startAt, limit: 2 });
      expect(lowered.nextTick).toBeUndefined();
      expect(await queues.schedules('none')).toEqual([]);
      const k = scheduleRedisKeys(prefix, 'none');
      expect(await redis.exists(k.definitions, k.state)).toBe(0);
      expect(await redis.smembers(scheduleIndexKey(prefix))).toEqual([]);
    } finally {
      await app.close();
    }
  });

  it('a change is read and armed alone on every instance (no read of the whole queue), and the minute resync parses no unchanged definition', async () => {
    const prefix = uniquePrefix('queue-schedule-one');
    const [a, b] = [
      await createLockApp({ keyPrefix: prefix }),
      await createLockApp({ keyPrefix: prefix }),
    ];
    try {
      const queues = a.get(QueueService);
      await Promise.all(
        Array.from({ length: 30 }, (_, i) => queues.schedule('many', `s${i}`, { everyMs: 60_000 })),
      );
      await waitFor('b armed the 30', () => schedulerOf(b).timers.get('many')?.size === 30);
      // Whole-queue reads, per instance.
      const full: string[] = [];
      for (const [name, app] of [
        ['a', a],
        ['b', b],
      ] as const) {
        const connection = app.get(RedisLockConnection);
        const run = connection.run.bind(connection);
        jest.spyOn(connection, 'run').mockImplementation((script, keys, args) => {
          if (script === QUEUE_SCHEDULE_SCRIPTS.read) full.push(name);
          return run(script, keys, args);
        });
      }
      const parsed = jest.spyOn(ticksModule, 'scheduleTicks');
      await queues.schedule('many', 'new', { everyMs: 60_000 });
      await waitFor(
        'b armed the new one',
        () => schedulerOf(b).timers.get('many')?.has('new') === true,
      );
      expect(full).toEqual([]);
      // Once on a, once on b.
      expect(parsed).toHaveBeenCalledTimes(2);
      await schedulerOf(b).sync();
      expect(full).toEqual(['b']);
      expect(parsed).toHaveBeenCalledTimes(2);
      expect(schedulerOf(b).timers.get('many')?.size).toBe(31);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('a sync that keeps failing keeps one retry pending, backing off, instead of one more retry chain a minute', async () => {
    // Timers only: Redis clients of the other tests keep reading the real clock.
    jest.useFakeTimers({ doNotFake: ['Date', 'performance'] });
    try {
      const smembers = jest.fn(() => Promise.reject(new Error('read failed')));
      const connection = {
        options: { keyPrefix: 'x:' },
        client: { status: 'ready' },
        hub: { listen: () => Promise.resolve(() => undefined) },
        call: () => smembers(),
      } as unknown as RedisLockConnection;
      const logger = { warn: jest.fn() } as unknown as RedactingLogger;
      const scheduler = new QueueScheduler(connection, logger);
      await scheduler.start();
      await jest.advanceTimersByTimeAsync(10 * 60_000);
      // At 0 s, then retries 1, 2, 4 … 32 s apart, then a minute apart: 15 reads in 10 minutes.
      expect(smembers).toHaveBeenCalledTimes(15);
      // The minute resync and one retry.
      expect(jest.getTimerCount()).toBe(2);
      scheduler.close();
      expect(jest.getTimerCount()).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });

  describe('ticks (croner in a time zone)', () => {
    const utc = (iso: string) => Date.parse(iso);
    const iso = (ms: number | undefined) =>
      ms === undefined ? undefined : new Date(ms).toISOString();

    it('spring forward in Europe/Berlin: a daily 02:30 that does not exist runs once, at 03:00', () => {
      const ticks = scheduleTicks({ cron: '30 2 * * *', tz: 'Europe/Berlin', anchor: 0 });
      expect(iso(ticks.after(utc('2026-03-28T12:00:00Z')))).toBe('2026-03-29T01:00:00.000Z');
      expect(iso(ticks.after(utc('2026-03-29T01:00:00Z')))).toBe('2026-03-30T00:30:00.000Z');
      // 09:00 local moves from 08:00 UTC (CET) to 07:00 UTC (CEST).
      const nine = scheduleTicks({ cron: '0 9 * * *', tz: 'Europe/Berlin', anchor: 0 });
      expect(iso(nine.after(utc('2026-03-28T00:00:00Z')))).toBe('2026-03-28T08:00:00.000Z');
      expect(iso(nine.after(utc('2026-03-28T08:00:00Z')))).toBe('2026-03-29T07:00:00.000Z');
    });

    it('fall back in America/New_York: 01:30 (twice that night) runs once; hourly runs 25 times that day', () => {
      const daily = scheduleTicks({ cron: '30 1 * * *', tz: 'America/New_York', anchor: 0 });
      expect(iso(daily.after(utc('2026-10-31T12:00:00Z')))).toBe('2026-11-01T05:30:00.000Z');
      expect(iso(daily.after(utc('2026-11-01T05:30:00Z')))).toBe('2026-11-02T06:30:00.000Z');
      const hourly = scheduleTicks({ cron: '0 * * * *', tz: 'America/New_York', anchor: 0 });
      // From local midnight (04:00 UTC, EDT) to the next local midnight (05:00 UTC, EST).
      let t = utc('2026-11-01T04:00:00Z') - 1;
      let n = 0;
      while ((t = hourly.after(t)!) < utc('2026-11-02T05:00:00Z')) n++;
      expect(n).toBe(25);
      expect(iso(hourly.atOrBefore(utc('2026-11-01T06:30:00Z')))).toBe('2026-11-01T06:00:00.000Z');
    });

    it('everyMs ticks from the anchor; none after endAt', () => {
      const ticks = scheduleTicks({ everyMs: 100, anchor: 1_000, endAt: 1_250 });
      expect([ticks.after(0), ticks.after(1_000), ticks.after(1_150), ticks.after(1_200)]).toEqual([
        1_000,
        1_100,
        1_200,
        undefined,
      ]);
      expect([ticks.atOrBefore(999), ticks.atOrBefore(1_199), ticks.atOrBefore(5_000)]).toEqual([
        undefined,
        1_100,
        1_200,
      ]);
    });
  });

  it('rejects bad options with a QueueError naming the option', async () => {
    const app = await createLockApp({ keyPrefix: uniquePrefix('queue-schedule-bad') });
    try {
      const queues = app.get(QueueService);
      const bad = async (options: unknown, argument: string) => {
        const err = await queues.schedule('q', 's', options as never).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(QueueError);
        expect((err as QueueError).argument).toBe(argument);
      };
      await bad({}, 'options');
      await bad({ cron: '* * * * *', everyMs: 100 }, 'options');
      await bad({ everyMs: 5 }, 'everyMs');
      await bad({ cron: '99 * * * *' }, 'cron');
      // Reads, but never fires (February 31st); a 7th field (years) croner alone would read.
      await bad({ cron: '0 0 31 2 *' }, 'cron');
      await bad({ cron: '0 0 0 * * * 2030' }, 'cron');
      await bad({ cron: '* * * *' }, 'cron');
      await bad({ cron: '* * * * *', tz: 'Nowhere/City' }, 'tz');
      await bad({ everyMs: 100, tz: 'UTC' }, 'tz');
      await bad({ everyMs: 100, startAt: 2_000, endAt: 1_000 }, 'endAt');
      // Croner computes no tick from these (it threw near the largest Date): refused, not stored.
      await bad({ cron: '* * * * *', startAt: 8_640_000_000_000_000 }, 'startAt');
      await bad(
        { cron: '0 9 * * *', tz: 'Asia/Tokyo', startAt: Date.parse('3001-01-01') },
        'startAt',
      );
      await bad({ everyMs: 100, limit: 0 }, 'limit');
      await bad({ everyMs: 100, payload: () => 1 }, 'payload');
      await bad({ every: 100 }, 'every');
      await bad({ everyMs: 100, name: '' }, 'name');
      await bad({ everyMs: 100, name: 7 }, 'name');
      // Hostile sizes: the error stays short, whatever croner quotes of the input.
      const long = async (cron: string) => {
        await bad({ cron }, 'cron');
        const err = (await queues.schedule('q', 's', { cron }).catch((e: unknown) => e)) as Error;
        expect(err.message.length).toBeLessThan(400);
      };
      await long('x'.repeat(100_000));
      await long('1,'.repeat(256) + '1 * * * *');
      await long('* * * * * ' + 'x'.repeat(400));
      expect(await queues.schedules('q')).toEqual([]);
    } finally {
      await app.close();
    }
  });
});
