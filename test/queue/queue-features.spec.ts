import 'reflect-metadata';
import { Logger, type INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  QueueError,
  QueueService,
  RedisLockEvents,
  RedisLockOptionsError,
  type LeasedTask,
  type RedisLockEventMap,
} from '../../lib';
import {
  createLockApp,
  deferred,
  redisClient,
  redisTimeMs,
  uniquePrefix,
  waitFor,
  queueStats,
} from '../support/helpers';
import { queueRedisKeys } from '../../lib/queue/queue-keys';

describe('QueueService features', () => {
  const prefix = uniquePrefix('queue-features');
  let app: INestApplicationContext;
  let queues: QueueService;
  let events: RedisLockEvents;
  let redis: Redis;
  let n = 0;
  const fresh = () => `f${++n}`;
  const ids = (tasks: readonly { id: string }[]) => tasks.map((t) => t.id);

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix, queue: { backoffMs: 0 } });
    queues = app.get(QueueService);
    events = app.get(RedisLockEvents);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  describe('priorities', () => {
    it('runs lower numbers first, FIFO within a priority; a delayed task keeps its priority when due', async () => {
      const q = fresh();
      await queues.enqueue(q, 'a');
      await queues.enqueue(q, 'b', { priority: 5 });
      await queues.enqueue(q, 'c', { priority: -3 });
      await queues.enqueue(q, 'd', { priority: 5 });
      await queues.enqueue(q, 'e', { priority: -3 });
      await queues.enqueue(q, 'f');
      await queues.enqueue(q, 'g', { priority: -10, delayMs: 200 });
      expect(ids(await queues.claim(q, 10))).toEqual(['c', 'e', 'a', 'f', 'b', 'd']);
      await waitFor('g due', async () => (await queues.stats(q)).ready === 1, 5_000, 20);
      await queues.enqueue(q, 'x');
      await queues.enqueue(q, 'y', { priority: -1 });
      expect(ids(await queues.claim(q, 10))).toEqual(['g', 'y', 'x']);
    });
  });

  describe('groups', () => {
    it('a group limiter leases at most max tasks of a group per window, and its windows expire from Redis', async () => {
      const q = fresh();
      await queues.enqueue(q, ['a1', 'a2', 'a3'], { group: 'a' });
      await queues.enqueue(q, ['b1'], { group: 'b' });
      const limited = { groupConcurrency: 10, groupLimiter: { max: 2, durationMs: 60_000 } };
      const leased = await queues.claim(q, 10, limited);
      expect(ids(leased).sort()).toEqual(['a1', 'a2', 'b1']);
      expect(await queues.claim(q, 10, limited)).toEqual([]);
      // The windows' hash lives no longer than its latest window, whoever claims next.
      const pttl = await redis.pttl(queueRedisKeys(prefix, q).glimit);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(60_000);
    });

    it("a group limiter's ended windows go faster than a claim opens new ones", async () => {
      // A busy queue of many groups: its hash holds windows that ended (30 here) and every claim
      // opens windows of new groups (10) and renews the hash's expiry, so only the claims' looks
      // bound it. One look per call let it grow by 9 windows a call.
      const q = fresh();
      const glimit = queueRedisKeys(prefix, q).glimit;
      const ended = Array.from({ length: 30 }, (_, i) => [`old-${i}`, '1|1']).flat();
      await redis.hset(glimit, ...ended);
      await redis.pexpire(glimit, 60_000);
      const ids = Array.from({ length: 10 }, (_, i) => `t${i}`);
      await Promise.all(ids.map((id) => queues.enqueue(q, id, { group: id })));
      const limited = { groupConcurrency: 10, groupLimiter: { max: 5, durationMs: 60_000 } };
      expect(await queues.claim(q, 10, limited)).toHaveLength(10);
      const left = Object.keys(await redis.hgetall(glimit));
      expect(left.filter((g) => !g.startsWith('old-')).sort()).toEqual([...ids].sort());
      // Before leasing it looked at 2 * 10 + 2 windows, all ended here, and dropped them.
      expect(left.filter((g) => g.startsWith('old-')).length).toBeLessThanOrEqual(8);
    });

    it('retries a failed task before the later tasks of its group (the group waits for it)', async () => {
      const q = fresh();
      const runs: string[] = [];
      let failed = false;
      await queues.enqueue(q, ['1', '2', '3'], { group: 'g', payload: 0 });
      await queues.enqueue(q, 'other', { group: 'h', payload: 0 });
      const worker = queues.process(
        q,
        async (task) => {
          runs.push(task.id);
          if (task.id === '1' && !failed) {
            failed = true;
            throw new Error('first attempt fails');
          }
        },
        { concurrency: 4 },
      );
      await waitFor('all acked', async () => {
        const s = await queues.stats(q);
        return s.ready + s.delayed + s.leased === 0;
      });
      await worker.close();
      expect(runs.filter((id) => id !== 'other')).toEqual(['1', '1', '2', '3']);
      expect(runs.filter((id) => id === 'other')).toEqual(['other']);
    });
  });

  describe('debounce', () => {
    it('replaces the payload and moves the due time on every call: the task runs once, with the last payload', async () => {
      const q = fresh();
      expect(await queues.enqueue(q, 'k', { debounceMs: 300, payload: 1 })).toBe(1);
      const first = (await queues.get(q, 'k'))!.time;
      expect(await queues.enqueue(q, 'k', { debounceMs: 300, payload: 2 })).toBe(0);
      expect(await queues.enqueue(q, 'k', { debounceMs: 300, payload: 3 })).toBe(0);
      const last = await queues.get(q, 'k');
      expect(last).toMatchObject({ state: 'delayed', payload: 3 });
      expect(last!.time).toBeGreaterThanOrEqual(first);
      expect(await queues.stats(q)).toMatchObject({ ready: 0, delayed: 1 });
      const runs: unknown[] = [];
      const worker = queues.process(q, async (task) => void runs.push(task.payload));
      await waitFor('ran', () => runs.length > 0, 10_000);
      await waitFor('acked', async () => (await queues.stats(q)).leased === 0);
      await worker.close();
      expect(runs).toEqual([3]);
    });
  });

  describe('pause / resume', () => {
    it('lets in-flight tasks finish, claims nothing while paused (every instance), resumes', async () => {
      const q = fresh();
      const release = deferred();
      const started: string[] = [];
      let pausedWindow = false;
      let startedWhilePaused = 0;
      const worker = queues.process(
        q,
        async (task) => {
          started.push(task.id);
          if (pausedWindow) startedWhilePaused++;
          if (task.id.startsWith('first')) await release.promise;
        },
        { concurrency: 2 },
      );
      await queues.enqueue(q, ['first-1', 'first-2']);
      await waitFor('both running', () => started.length === 2);
      await queues.pause(q);
      pausedWindow = true;
      await queues.enqueue(q, ['later-1', 'later-2', 'later-3']);
      release.resolve();
      await waitFor('in-flight acked', async () => (await queues.stats(q)).leased === 0);
      expect(await queues.claim(q, 10)).toEqual([]);
      expect(await queues.stats(q)).toMatchObject(queueStats({ ready: 3, paused: true }));
      pausedWindow = false;
      await queues.resume(q);
      await waitFor('all ran', () => started.length === 5);
      await waitFor('all acked', async () => (await queues.stats(q)).leased === 0);
      await worker.close();
      expect(startedWhilePaused).toBe(0);
      expect(started.slice(2).sort()).toEqual(['later-1', 'later-2', 'later-3']);
      expect((await queues.stats(q)).paused).toBe(false);
    });
  });

  describe('keepCompleted and keepDead', () => {
    it('refuses an acked id within keepCompleted, keeps at most count of them, forgets them after ageMs', async () => {
      const q = fresh();
      await queues.enqueue(q, ['a', 'b', 'c']);
      const worker = queues.process(q, async () => undefined, {
        keepCompleted: { ageMs: 60_000, count: 2 },
      });
      await waitFor('acked', async () => {
        const s = await queues.stats(q);
        return s.ready + s.leased === 0;
      });
      await worker.close();
      // FIFO at concurrency 1: a, b, c acked in order; only the last two are kept.
      expect(await queues.enqueue(q, ['a', 'b', 'c'])).toBe(1);
      expect(ids(await queues.claim(q, 10))).toEqual(['a']);

      const q2 = fresh();
      await queues.enqueue(q2, 'x');
      const short = queues.process(q2, async () => undefined, {
        keepCompleted: { ageMs: 300, count: 10 },
      });
      await waitFor(
        'acked',
        async () => (await queues.stats(q2)).leased + (await queues.stats(q2)).ready === 0,
      );
      await short.close();
      const keptUntil = Number(await redis.zscore(`${prefix}queue:{${q2}}:done`, 'x'));
      expect(await queues.enqueue(q2, 'x')).toBe(0);
      await waitFor('window over', async () => (await redisTimeMs(redis)) > keptUntil, 5_000, 20);
      // In a call of several ids too (which reads them all at once): x again, y new, x given twice.
      expect(await queues.enqueue(q2, ['x', 'y', 'x'])).toBe(2);
      expect(ids(await queues.claim(q2, 10))).toEqual(['x', 'y']);
    });

    it('keeps at most keepDead.count dead tasks, deleting the oldest with their payload', async () => {
      const q = fresh();
      const worker = queues.process(
        q,
        async () => {
          throw new Error('always');
        },
        { maxAttempts: 1, keepDead: { ageMs: 86_400_000, count: 2 } },
      );
      for (const id of ['d1', 'd2', 'd3']) {
        await queues.enqueue(q, id, { payload: id });
        await waitFor(`${id} dead`, async () => (await queues.get(q, id))?.state === 'dead');
      }
      await worker.close();
      expect(ids(await queues.list(q, 'dead'))).toEqual(['d2', 'd3']);
      expect(await redis.hexists(`${prefix}queue:{${q}}:payload`, 'd1')).toBe(0);
      expect(await queues.get(q, 'd1')).toBeUndefined();
    });
  });

  describe('inspection', () => {
    it('lists each state in order with offset/limit, gets one task, removes, requeues dead ones', async () => {
      const q = fresh();
      await queues.enqueue(q, ['r1', 'r2'], { payload: { v: 1 } });
      await queues.enqueue(q, 'urgent', { priority: -1 });
      await queues.enqueue(q, 'low', { priority: 1 });
      await queues.enqueue(q, 'grouped', { group: 'g' });
      await queues.enqueue(q, 'later', { delayMs: 60_000 });
      await queues.enqueue(q, 'later-p', { delayMs: 60_000, priority: 2 });
      expect(ids(await queues.list(q, 'ready'))).toEqual(['urgent', 'r1', 'r2', 'low', 'grouped']);
      expect(ids(await queues.list(q, 'ready', { offset: 1, limit: 2 }))).toEqual(['r1', 'r2']);
      expect(ids(await queues.list(q, 'ready', { offset: 3, limit: 5 }))).toEqual([
        'low',
        'grouped',
      ]);
      expect(ids(await queues.list(q, 'delayed'))).toEqual(['later', 'later-p']);

      const [urgent] = await queues.claim(q, 1, { maxAttempts: 1 });
      expect(urgent.id).toBe('urgent');
      expect(ids(await queues.list(q, 'leased'))).toEqual(['urgent']);
      expect(await queues.remove(q, 'urgent')).toBe(false);
      expect(await queues.nack(urgent, { maxAttempts: 1 })).toBe('dead');
      await redis.hset(`${prefix}queue:{${q}}:errors`, 'urgent', 'boom');
      expect(await queues.get(q, 'urgent')).toMatchObject({
        queue: q,
        id: 'urgent',
        state: 'dead',
        attempts: 1,
        lastError: 'boom',
        priority: -1,
      });
      expect(await queues.get(q, 'r1')).toMatchObject({
        state: 'ready',
        attempts: 0,
        payload: { v: 1 },
      });
      expect(await queues.get(q, 'grouped')).toMatchObject({ state: 'ready', group: 'g' });
      expect(await queues.get(q, 'later-p')).toMatchObject({ state: 'delayed', priority: 2 });
      expect(await queues.get(q, 'nope')).toBeUndefined();

      expect(await queues.remove(q, 'r2')).toBe(true);
      expect(await queues.remove(q, 'grouped')).toBe(true);
      expect(await queues.remove(q, 'r2')).toBe(false);
      expect(ids(await queues.list(q, 'ready'))).toEqual(['r1', 'low']);

      expect(await queues.requeueDead(q, ['urgent', 'r1'])).toBe(1);
      expect(await queues.get(q, 'urgent')).toMatchObject({ state: 'ready', attempts: 0 });
      expect((await queues.get(q, 'urgent'))!.lastError).toBeUndefined();
      expect(ids(await queues.claim(q, 1))).toEqual(['urgent']);
    });
  });

  describe('last error', () => {
    it("records 'lease expired' when a lease runs out, and forgets it when the task is acked", async () => {
      const q = fresh();
      await queues.enqueue(q, 'slow');
      const [first] = await queues.claim(q, 1, { leaseMs: 50 });
      await waitFor('lease expired', async () => (await redisTimeMs(redis)) > first.leaseExpiresAt);
      const [second] = await queues.claim(q, 1);
      expect(await queues.get(q, 'slow')).toMatchObject({
        state: 'leased',
        attempts: 2,
        lastError: 'lease expired',
      });
      expect(await queues.ack(second)).toBe(true);
      expect(await redis.hlen(`${prefix}queue:{${q}}:errors`)).toBe(0);
    });
  });

  describe('events', () => {
    it('emits failed and retried, then completed, then failed and dead, with attempts; unsubscribe and once work', async () => {
      const q = fresh();
      const seen: string[] = [];
      const offs = (['task.completed', 'task.failed', 'task.retried', 'task.dead'] as const).map(
        (name) =>
          events.on(name, (e: RedisLockEventMap[typeof name]) => {
            if (e.queue === q) seen.push(`${name}:${e.id}:${e.attempt}`);
          }),
      );
      const once: string[] = [];
      events.once('task.completed', (e) => void once.push(e.id));
      let attempts = 0;
      const worker = queues.process(
        q,
        async (task: LeasedTask) => {
          if (task.id === 'flaky' && ++attempts === 1) throw new Error('flaky');
          if (task.id === 'doomed') throw new Error('doomed');
        },
        { maxAttempts: 2 },
      );
      await queues.enqueue(q, 'flaky');
      await waitFor('flaky done', () => seen.includes('task.completed:flaky:2'));
      await queues.enqueue(q, 'doomed');
      await waitFor('doomed dead', () => seen.includes('task.dead:doomed:2'));
      offs.forEach((off) => off());
      await queues.enqueue(q, 'after');
      await waitFor(
        'after acked',
        async () => (await queues.stats(q)).ready + (await queues.stats(q)).leased === 0,
      );
      await worker.close();
      expect(seen).toEqual([
        'task.failed:flaky:1',
        'task.retried:flaky:1',
        'task.completed:flaky:2',
        'task.failed:doomed:1',
        'task.retried:doomed:1',
        'task.failed:doomed:2',
        'task.dead:doomed:2',
      ]);
      expect(once).toEqual(['flaky']);
      expect(events.hasListeners('task.completed')).toBe(false);
    });

    it('logs an async listener whose promise rejects as one that throws; the worker and the other listeners go on', async () => {
      const q = fresh();
      const logged: string[] = [];
      const errors = jest
        .spyOn(Logger.prototype, 'error')
        .mockImplementation((message: unknown) => void logged.push(String(message)));
      const completed: string[] = [];
      const offs = [
        events.on('task.completed', async (e) => {
          if (e.queue === q) throw new Error(`pager unreachable (${e.id})`);
        }),
        events.on('task.completed', (e) => {
          if (e.queue === q) completed.push(e.id);
        }),
        events.once('task.completed', () => Promise.reject(new Error('once unreachable'))),
      ];
      const worker = queues.process(q, async () => undefined);
      try {
        await queues.enqueue(q, 'a');
        await waitFor('a done', () => completed.length === 1);
        await queues.enqueue(q, 'b');
        await waitFor('b done', () => completed.length === 2);
        await waitFor('the rejections logged', () => logged.length === 3);
      } finally {
        offs.forEach((off) => off());
        await worker.close();
        errors.mockRestore();
      }
      expect(completed).toEqual(['a', 'b']);
      expect(logged).toEqual([
        "a listener of 'task.completed' threw: pager unreachable (a)",
        "a listener of 'task.completed' threw: once unreachable",
        "a listener of 'task.completed' threw: pager unreachable (b)",
      ]);
    });
  });

  describe('bad options', () => {
    const invalid = async (
      call: () => unknown,
      type: typeof QueueError | typeof RedisLockOptionsError,
      name: string,
    ) => {
      let err: unknown;
      try {
        await call();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(type);
      expect((err as Error).message).toContain(`'${name}'`);
    };

    it('rejects each new option with a typed error naming it and the value', async () => {
      const q = fresh();
      await invalid(() => queues.enqueue(q, 'a', { priority: 1001 }), QueueError, 'priority');
      await invalid(() => queues.enqueue(q, 'a', { priority: 1.5 }), QueueError, 'priority');
      await invalid(() => queues.enqueue(q, 'a', { group: '' }), QueueError, 'group');
      await invalid(() => queues.enqueue(q, 'a', { group: 'a\0b' }), QueueError, 'group');
      await invalid(
        () => queues.enqueue(q, 'a', { group: 'g', priority: 1 }),
        QueueError,
        'priority',
      );
      await invalid(
        () => queues.enqueue(q, 'a', { debounceMs: 5, delayMs: 5 }),
        QueueError,
        'debounceMs',
      );
      await invalid(() => queues.enqueue(q, 'a', { debounceMs: -1 }), QueueError, 'debounceMs');
      await invalid(
        () => queues.process(q, () => undefined, { limiter: { max: 0, durationMs: 1 } }),
        RedisLockOptionsError,
        'limiter.max',
      );
      await invalid(
        () => queues.process(q, () => undefined, { groupLimiter: { max: 1, durationMs: 0 } }),
        RedisLockOptionsError,
        'groupLimiter.durationMs',
      );
      await invalid(
        () => queues.process(q, () => undefined, { groupConcurrency: 0 }),
        RedisLockOptionsError,
        'groupConcurrency',
      );
      await invalid(
        () => queues.process(q, () => undefined, { keepCompleted: { ageMs: -1, count: 1 } }),
        RedisLockOptionsError,
        'keepCompleted.ageMs',
      );
      await invalid(
        () =>
          queues.process(q, () => undefined, { keepDead: { ageMs: 1, count: 1, x: 1 } as never }),
        RedisLockOptionsError,
        'keepDead.x',
      );
      await invalid(
        () => queues.claim(q, 1, { limiter: { max: 1 } as never }),
        QueueError,
        'limiter.durationMs',
      );
      await invalid(() => queues.setGlobalConcurrency(q, 0), QueueError, 'n');
      await invalid(() => queues.list(q, 'running' as never), QueueError, 'state');
      await invalid(() => queues.list(q, 'ready', { limit: 0 }), QueueError, 'limit');
    });

    it("rejects enqueue's own maxAttempts, timeoutMs, backoff and waitForReplicas with QueueError naming them", async () => {
      const q = fresh();
      for (const [options, argument] of [
        [{ maxAttempts: 0 }, 'maxAttempts'],
        [{ timeoutMs: 0 }, 'timeoutMs'],
        [{ backoff: { type: 'linear', delayMs: 10 } }, 'backoff.type'],
        [{ backoff: 'fast' }, 'backoff'],
        [{ waitForReplicas: { replicas: 0, timeoutMs: 10 } }, 'waitForReplicas.replicas'],
        [{ waitForReplicas: null }, 'waitForReplicas'],
      ] as const) {
        const err = await queues.enqueue(q, 'a', options as never).catch((e: unknown) => e);
        expect([argument, err]).toEqual([argument, expect.any(QueueError)]);
        expect((err as QueueError).argument).toBe(argument);
        expect((err as Error).message).toContain(`invalid argument '${argument}'`);
      }
      expect(await queues.get(q, 'a')).toBeUndefined();
      // The same option of enqueueFlow and ack.
      const flow = queues.enqueueFlow({ queue: q, id: 'f' }, { waitForReplicas: null as never });
      await expect(flow).rejects.toMatchObject({ name: 'QueueError', argument: 'waitForReplicas' });
      expect(await queues.get(q, 'f')).toBeUndefined();
      await queues.enqueue(q, 'b');
      const [task] = await queues.claim(q);
      await expect(
        queues.ack(task, undefined, { waitForReplicas: { replicas: 1 } as never }),
      ).rejects.toMatchObject({ name: 'QueueError', argument: 'waitForReplicas.timeoutMs' });
      expect(await queues.ack(task)).toBe(true);
    });
  });
});
