import 'reflect-metadata';
import type { Redis } from 'ioredis';
import { filter, firstValueFrom } from 'rxjs';
import { QueueError, QueueService, RedisLockOptionsError, type RunningTask } from '../../lib';
import {
  createLockApp,
  deferred,
  queueStats,
  redisClient,
  redisTimeMs,
  sleep,
  uniquePrefix,
  waitFor,
} from '../support/helpers';
import { compareEventIds } from '../../lib/queue/queue-event-reader';

describe('QueueService maintenance: clean, drain, obliterate, LIFO, concurrency at runtime', () => {
  const prefix = uniquePrefix('queue-maintenance');
  let app: Awaited<ReturnType<typeof createLockApp>>;
  let queues: QueueService;
  let redis: Redis;
  let n = 0;
  const fresh = () => `maint-${++n}`;
  const key = (q: string, part: string) => `${prefix}queue:{${q}}:${part}`;
  /** Types of the queue's events, oldest first. */
  const eventTypes = async (q: string) =>
    (await redis.xrange(key(q, 'events'), '-', '+')).map(([, f]) => f[f.indexOf('t') + 1]);
  /** Every key the queue has in Redis. */
  const queueKeys = async (q: string) => (await redis.keys(`${prefix}queue:{${q}}:*`)).sort();

  beforeAll(async () => {
    app = await createLockApp({
      keyPrefix: prefix,
      queue: { keepCompleted: { ageMs: 3_600_000, count: 10_000 } },
    });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  /** Enqueues `ids` and completes them all (ack with a result). */
  async function complete(q: string, ids: string[]): Promise<void> {
    for (let i = 0; i < ids.length; i += 1_000) {
      await queues.enqueue(q, ids.slice(i, i + 1_000), { payload: { i } });
      const leased = await queues.claim(q, 1_000);
      await Promise.all(leased.map((t) => queues.ack(t, 'ok')));
    }
  }

  /** Enqueues `ids` and lets each die at its first failure. */
  async function kill(q: string, ids: string[]): Promise<void> {
    for (let i = 0; i < ids.length; i += 1_000) {
      await queues.enqueue(q, ids.slice(i, i + 1_000));
      const leased = await queues.claim(q, 1_000);
      const results = await Promise.all(leased.map((t) => queues.nack(t, { maxAttempts: 1 })));
      expect(results.every((r) => r === 'dead')).toBe(true);
    }
  }

  const ids = (tag: string, count: number) => Array.from({ length: count }, (_, i) => `${tag}${i}`);

  describe('clean', () => {
    it('deletes 2,500 completed tasks in chunks, with their data and one removed event each', async () => {
      const q = fresh();
      await complete(q, ids('c', 2_500));
      expect((await queues.stats(q)).completed).toBe(2_500);
      const before = (await eventTypes(q)).length;
      expect(await queues.clean(q, 'completed')).toBe(2_500);
      expect(await queues.stats(q)).toMatchObject(queueStats({ completed: 0 }));
      for (const part of ['payload', 'attempts', 'info', 'results', 'done']) {
        expect(await redis.exists(key(q, part))).toBe(0);
      }
      const types = (await eventTypes(q)).slice(before);
      expect(types.filter((t) => t === 'removed')).toHaveLength(2_500);
      expect(await queues.clean(q, 'completed')).toBe(0);
    });

    it('keeps the tasks that finished less than olderThanMs ago', async () => {
      const q = fresh();
      await complete(q, ids('old', 30));
      await kill(q, ids('olddead', 7));
      const mark = await redisTimeMs(redis);
      await sleep(200);
      await complete(q, ids('new', 20));
      await kill(q, ids('newdead', 4));
      const olderThanMs = (await redisTimeMs(redis)) - mark - 100;
      expect(await queues.clean(q, 'completed', { olderThanMs })).toBe(30);
      expect(await queues.clean(q, 'dead', { olderThanMs })).toBe(7);
      expect(await queues.stats(q)).toMatchObject(queueStats({ completed: 20, dead: 4 }));
      expect(await queues.get(q, 'new0')).toMatchObject({ state: 'completed' });
      expect(await queues.get(q, 'old0')).toBeUndefined();
    });

    it('stops at limit, across chunks too', async () => {
      const q = fresh();
      await complete(q, ids('l', 1_500));
      await kill(q, ids('d', 1_200));
      expect(await queues.clean(q, 'completed', { limit: 1_234 })).toBe(1_234);
      expect(await queues.clean(q, 'dead', { limit: 1_100 })).toBe(1_100);
      expect(await queues.stats(q)).toMatchObject(queueStats({ completed: 266, dead: 100 }));
    });

    it('deletes cancelled tasks and leaves other states alone', async () => {
      const q = fresh();
      await queues.enqueue(q, ['a', 'b', 'c', 'ready']);
      for (const id of ['a', 'b', 'c']) expect(await queues.cancel(q, id)).toBe('cancelled');
      expect(await queues.clean(q, 'cancelled')).toBe(3);
      expect(await queues.stats(q)).toMatchObject(queueStats({ ready: 1, cancelled: 0 }));
      expect(await queues.get(q, 'a')).toBeUndefined();
      // The id can be enqueued again as a new task.
      expect(await queues.enqueue(q, 'a')).toBe(1);
    });

    it('refuses bad input before sending anything', async () => {
      const q = fresh();
      const bad = async (call: () => Promise<unknown>, argument: string) => {
        const err = await call().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(QueueError);
        expect((err as QueueError).argument).toBe(argument);
      };
      await bad(() => queues.clean(q, 'ready' as 'dead'), 'state');
      await bad(() => queues.clean(q, 'dead', { olderThanMs: -1 }), 'olderThanMs');
      await bad(() => queues.clean(q, 'dead', { olderThanMs: 1.5 }), 'olderThanMs');
      await bad(() => queues.clean(q, 'dead', { limit: 0 }), 'limit');
      await bad(() => queues.clean(q, 'dead', { grace: 1 } as never), 'grace');
      await bad(() => queues.clean('', 'dead'), 'queue');
      await bad(() => queues.drain(q, { delayed: 'yes' as never }), 'delayed');
      await bad(() => queues.obliterate(q, { force: 1 as never }), 'force');
      await bad(() => queues.enqueue(q, 'x', { lifo: 'yes' as never }), 'lifo');
      await bad(() => queues.enqueue(q, 'x', { lifo: true, delayMs: 10 }), 'lifo');
      await bad(() => queues.enqueue(q, 'x', { lifo: true, priority: 1 }), 'lifo');
      await bad(() => queues.enqueue(q, 'x', { lifo: true, group: 'g' }), 'lifo');
      await bad(() => queues.enqueue(q, 'x', { lifo: true, replace: true }), 'lifo');
      expect(await queueKeys(q)).toEqual([]);
    });
  });

  describe('drain', () => {
    it('deletes 2,300 ready tasks (plain, prioritized, grouped) in chunks; delayed, leased and finished stay', async () => {
      const q = fresh();
      await complete(q, ['done']);
      await queues.enqueue(q, ids('r', 1_000), { payload: 1 });
      await queues.enqueue(q, ids('p', 500), { priority: 3 });
      await queues.enqueue(q, ids('g', 300), { group: 'g1' });
      await queues.enqueue(q, ids('h', 200), { group: 'g2' });
      await queues.enqueue(q, ids('x', 300), { payload: 2 });
      await queues.enqueue(q, ids('later', 40), { delayMs: 60_000 });
      await queues.enqueue(q, ids('laterp', 10), { delayMs: 60_000, priority: 2 });
      const [leased] = await queues.claim(q, 1);
      expect(await queues.stats(q)).toMatchObject(
        queueStats({ ready: 2_299, delayed: 50, leased: 1, completed: 1 }),
      );
      const before = (await eventTypes(q)).length;
      expect(await queues.drain(q)).toBe(2_299);
      expect(await queues.stats(q)).toMatchObject(
        queueStats({ ready: 0, delayed: 50, leased: 1, completed: 1 }),
      );
      expect((await eventTypes(q)).slice(before)).toEqual(
        Array.from({ length: 2_299 }, () => 'removed'),
      );
      expect(await redis.hlen(key(q, 'info'))).toBe(52);
      expect(await redis.exists(key(q, 'ring'))).toBe(0);
      expect(await queues.ack(leased)).toBe(true);
      expect(await queues.drain(q, { delayed: true })).toBe(50);
      expect(await queues.stats(q)).toMatchObject(queueStats({ delayed: 0, completed: 2 }));
      expect(await redis.hlen(key(q, 'info'))).toBe(2);
      // The queue works as before.
      await queues.enqueue(q, 'again', { group: 'g1' });
      expect((await queues.claim(q, 5)).map((t) => t.id)).toEqual(['again']);
    });
  });

  describe('obliterate', () => {
    it('refuses while a task is leased, then deletes every key but the event that says so', async () => {
      const q = fresh();
      await complete(q, ids('c', 3));
      await kill(q, ids('d', 2));
      await queues.enqueue(q, ids('r', 5), { group: 'g' });
      await queues.enqueue(q, ids('p', 5), { priority: 1, payload: 'x' });
      await queues.pause(q);
      await queues.resume(q);
      await queues.setMaxSize(q, 100);
      const [task] = await queues.claim(q, 1);
      const err = await queues.obliterate(q).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(QueueError);
      expect((err as Error).message).toContain(
        `queue '${q}' not obliterated: 1 task(s) are leased`,
      );
      expect(await queues.stats(q)).toMatchObject(
        queueStats({ ready: 9, leased: 1, completed: 3, dead: 2 }),
      );
      await queues.ack(task);
      await queues.obliterate(q);
      expect(await queueKeys(q)).toEqual([key(q, 'events')]);
      expect(await eventTypes(q)).toEqual(['obliterated']);
      expect(await queues.stats(q)).toMatchObject(queueStats());
    });

    it('fails a waitFor of a task it deleted, saying so, instead of letting it wait out its timeout', async () => {
      const q = fresh();
      await queues.enqueue(q, ['a', 'b']);
      const waiting = queues.waitFor(q, 'a', { timeoutMs: 10_000 }).catch((e: Error) => e);
      // The wait is set up (it looked the task up) before the queue goes.
      await new Promise((resolve) => setTimeout(resolve, 100));
      await queues.obliterate(q);
      const err = await waiting;
      expect(err).toBeInstanceOf(QueueError);
      expect((err as Error).message).toBe(
        `queue '${q}': task 'a' was removed before it finished (the queue was obliterated)`,
      );
    });

    it("keeps the stream's ids rising: a reader already at its last id still sees the obliterate", async () => {
      const q = fresh();
      await queues.enqueue(q, 'a');
      const waiting = queues.waitFor(q, 'a', { timeoutMs: 3_000 }).catch((e: Error) => e);
      // The last event's id ahead of the Redis clock, as after a burst in one millisecond or a
      // failover to a server whose clock is behind; the reader reads it.
      const seen = firstValueFrom(
        queues.events(q).pipe(filter((e) => e.type === 'progress' && e.taskId === 'other')),
      );
      const [seconds] = await redis.time();
      const ahead = `${Number(seconds) * 1000 + 600_000}-0`;
      await redis.xadd(key(q, 'events'), ahead, 't', 'progress', 'i', 'other', 'p', '1');
      await seen;
      await queues.obliterate(q);
      const [[id]] = (await redis.xrange(key(q, 'events'), '-', '+')) as [string, string[]][];
      expect(compareEventIds(id, ahead)).toBe(1);
      const err = await waiting;
      expect((err as Error).message).toBe(
        `queue '${q}': task 'a' was removed before it finished (the queue was obliterated)`,
      );
    });

    it('with force, deletes a queue with leased tasks: their acks are stale', async () => {
      const q = fresh();
      await queues.enqueue(q, ids('t', 10));
      const leased = await queues.claim(q, 4);
      await queues.obliterate(q, { force: true });
      expect(await queues.stats(q)).toMatchObject(queueStats());
      expect(await Promise.all(leased.map((t) => queues.ack(t)))).toEqual([
        false,
        false,
        false,
        false,
      ]);
      expect(await queueKeys(q)).toEqual([key(q, 'events')]);
    });
  });

  describe('LIFO enqueue', () => {
    it('claims the last LIFO task first, before FIFO ones; ids of one call last first', async () => {
      const q = fresh();
      await queues.enqueue(q, ['f1', 'f2']);
      await queues.enqueue(q, 'l1', { lifo: true });
      await queues.enqueue(q, 'f3');
      await queues.enqueue(q, ['l2', 'l3'], { lifo: true });
      await queues.enqueue(q, 'later', { delayMs: 60_000 });
      // An id that is queued already is not moved.
      expect(await queues.enqueue(q, 'f1', { lifo: true })).toBe(0);
      expect((await queues.top(q, 10)).map((t) => t.id)).toEqual([
        'l3',
        'l2',
        'l1',
        'f1',
        'f2',
        'f3',
      ]);
      expect((await queues.claim(q, 10)).map((t) => t.id)).toEqual([
        'l3',
        'l2',
        'l1',
        'f1',
        'f2',
        'f3',
      ]);
    });

    it('keeps 3,000 LIFO tasks in exact reverse order, all ready at once', async () => {
      const q = fresh();
      for (let i = 0; i < 3_000; i += 100) {
        await Promise.all(
          Array.from({ length: 100 }, (_, j) => `t${i + j}`).map((id) =>
            queues.enqueue(q, id, { lifo: true }),
          ),
        );
      }
      expect((await queues.stats(q)).ready).toBe(3_000);
      const order: string[] = [];
      for (;;) {
        const popped = await queues.pop(q, 1_000);
        if (popped.length === 0) break;
        order.push(...popped.map((t) => t.id));
      }
      expect(order).toEqual(Array.from({ length: 3_000 }, (_, i) => `t${2_999 - i}`));
    });
  });

  describe('task.log and logs()', () => {
    /** Runs one worker task of `q` that calls `body`, and waits until it completed. */
    async function runOne(
      q: string,
      id: string,
      body: (task: RunningTask) => Promise<void>,
      maxAttempts = 5,
    ) {
      await queues.enqueue(q, id);
      const done = deferred();
      const worker = queues.process(
        q,
        async (task) => {
          try {
            await body(task);
          } finally {
            done.resolve();
          }
        },
        { maxAttempts, retryLogLevel: 'off' },
      );
      await done.promise;
      await waitFor('settled', async () => (await queues.stats(q)).leased === 0);
      await worker.close();
    }

    it('keeps the last 100 lines, each cut to 1,000 characters, with one log event per line', async () => {
      const q = fresh();
      await runOne(q, 't', async (task) => {
        for (let i = 0; i < 250; i++) await task.log(`line ${i}`);
        await task.log('x'.repeat(1_500));
        await task.log('two\nlines "quoted" é');
      });
      const lines = await queues.logs(q, 't');
      expect(lines).toHaveLength(100);
      expect(lines.slice(0, 2)).toEqual(['line 152', 'line 153']);
      expect(lines[97]).toBe('line 249');
      expect(lines[98]).toBe('x'.repeat(1_000));
      expect(lines[99]).toBe('two\nlines "quoted" é');
      expect((await eventTypes(q)).filter((t) => t === 'log')).toHaveLength(252);
      expect(await queues.logs(q, 'unknown')).toEqual([]);
    });

    it('is deleted with the task: clean, remove, cancel, drain, pop, re-enqueue of a dead id', async () => {
      const q = fresh();
      await runOne(q, 'completed', (task) => task.log('a'));
      expect(await queues.logs(q, 'completed')).toEqual(['a']);
      expect(await queues.clean(q, 'completed')).toBe(1);
      expect(await queues.logs(q, 'completed')).toEqual([]);

      const withLog = async (id: string) => {
        await runOne(q, id, async (task) => {
          await task.log(`log of ${id}`);
          // Given back, due in a minute (so that no worker takes it again meanwhile).
          await task.delay(60_000);
        });
        expect(await queues.logs(q, id)).toEqual([`log of ${id}`]);
      };
      await withLog('removed');
      expect(await queues.remove(q, 'removed')).toBe(true);
      await withLog('cancelled');
      expect(await queues.cancel(q, 'cancelled')).toBe('cancelled');
      expect(await queues.clean(q, 'cancelled')).toBe(1);
      await withLog('ready');
      expect(await queues.enqueue(q, 'ready', { replace: true })).toBe(0);
      expect(await queues.drain(q)).toBe(1);
      await withLog('delayed');
      expect(await queues.drain(q)).toBe(0);
      expect(await queues.logs(q, 'delayed')).toEqual(['log of delayed']);
      expect(await queues.drain(q, { delayed: true })).toBe(1);
      await withLog('popped');
      expect(await queues.enqueue(q, 'popped', { replace: true })).toBe(0);
      expect((await queues.pop(q, 5)).map((t) => t.id)).toEqual(['popped']);
      for (const id of ['removed', 'cancelled', 'ready', 'delayed', 'popped']) {
        expect(await queues.logs(q, id)).toEqual([]);
      }
      await runOne(
        q,
        'dies',
        async (task) => {
          await task.log('last words');
          throw new Error('boom');
        },
        1,
      );
      expect(await queues.get(q, 'dies')).toMatchObject({ state: 'dead' });
      expect(await queues.logs(q, 'dies')).toEqual(['last words']);
      expect(await queues.enqueue(q, 'dies')).toBe(1);
      expect(await queues.logs(q, 'dies')).toEqual([]);
      expect(await redis.hlen(key(q, 'logs'))).toBe(0);
    });

    it('rejects a line that is not a string, and a stale lease', async () => {
      const q = fresh();
      let notString: unknown;
      let stale: unknown;
      await runOne(q, 't', async (task) => {
        notString = await task.log(42 as never).catch((e: unknown) => e);
        await queues.obliterate(q, { force: true });
        stale = await task.log('after').catch((e: unknown) => e);
      });
      expect(notString).toBeInstanceOf(QueueError);
      expect((notString as QueueError).argument).toBe('line');
      expect(stale).toBeInstanceOf(QueueError);
      expect(await queues.logs(q, 't')).toEqual([]);
    });
  });

  describe('concurrency at runtime', () => {
    it('runs more at once after setConcurrency(n) up, fewer after down', async () => {
      const q = fresh();
      let running = 0;
      let peak = 0;
      let lowered = false;
      /** `running` as each task started after the lowering (never above the new limit). */
      const startsAfterDown: number[] = [];
      const gates: (() => void)[] = [];
      const handle = queues.process(
        q,
        async () => {
          running++;
          peak = Math.max(peak, running);
          if (lowered) startsAfterDown.push(running);
          const gate = deferred();
          gates.push(() => gate.resolve());
          await gate.promise;
          running--;
        },
        { concurrency: 2 },
      );
      try {
        await queues.enqueue(q, ids('t', 40));
        await waitFor('2 running', () => running === 2);
        expect(handle.concurrency).toBe(2);
        handle.setConcurrency(6);
        await waitFor('6 running', () => running === 6);
        expect(handle.concurrency).toBe(6);
        handle.setConcurrency(3);
        lowered = true;
        // Nothing new starts until fewer than 3 run: release the 6 one at a time.
        for (let i = 0; i < 4; i++) gates.shift()!();
        await waitFor('3 running', () => running === 3 && gates.length === 3);
        for (let i = 0; i < 3; i++) gates.shift()!();
        await waitFor('3 running again', () => running === 3 && gates.length === 3);
        expect(peak).toBe(6);
        expect(startsAfterDown).toHaveLength(4);
        expect(Math.max(...startsAfterDown)).toBe(3);
        lowered = false;
        expect(() => handle.setConcurrency(0)).toThrow(RedisLockOptionsError);
        expect(() => handle.setConcurrency(1.5)).toThrow(RedisLockOptionsError);
        expect(handle.concurrency).toBe(3);
        expect(queues.localWorkers(q)).toEqual([handle]);
        queues.localWorkers(q)[0].setConcurrency(40);
        await waitFor('all 40 started', async () => (await queues.stats(q)).ready === 0);
        while (gates.length > 0) gates.shift()!();
        await waitFor('all done', async () => (await queues.stats(q)).completed === 40);
      } finally {
        while (gates.length > 0) gates.shift()!();
        await handle.close();
      }
      expect(queues.localWorkers(q)).toEqual([]);
    });
  });
});
