import 'reflect-metadata';
import { Injectable, Logger, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import {
  QueueError,
  QueueService,
  QueueWorker,
  RedisLockEvents,
  RedisLockModule,
  RedisLockOptionsError,
  type LeasedTask,
  type QueueWorkerHandle,
} from '../../lib';
import { backoffDelayMs, retryDelayMs } from '../../lib/queue/worker/failure-policy';
import {
  blockedClients,
  createLockApp,
  deferred,
  redisClient,
  scriptCalls,
  sleep,
  testRedisUrl,
  uniquePrefix,
  waitFor,
  queueStats,
} from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

// "No unhandled rejection" needs no listener here: Jest fails the running test on any unhandled
// rejection (and a `process.on('unhandledRejection')` in a test file never fires).
describe('QueueService workers', () => {
  const prefix = uniquePrefix('queue-worker');
  let app: INestApplicationContext;
  let queues: QueueService;
  let redis: Redis;
  let n = 0;
  const fresh = () => `w${++n}`;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  describe('process', () => {
    it('runs the handler on each task with its payload and acks it', async () => {
      const q = fresh();
      const seen: LeasedTask[] = [];
      const worker = queues.process(q, async (task) => void seen.push(task), { concurrency: 3 });
      await queues.enqueue(q, ['a', 'b', 'c'], { payload: { n: 1 } });
      await waitFor('three tasks', () => seen.length === 3);
      expect(seen.map((t) => t.id).sort()).toEqual(['a', 'b', 'c']);
      expect(seen[0]).toMatchObject({ queue: q, attempt: 1, payload: { n: 1 } });
      await waitFor('acks', async () => (await queues.stats(q)).leased === 0);
      expect(await queues.stats(q)).toMatchObject(queueStats());
      await worker.close();
    });

    it('after close() claims nothing more', async () => {
      const q = fresh();
      let runs = 0;
      const worker = queues.process(q, () => void runs++);
      await worker.close();
      await worker.close();
      await queues.enqueue(q, 'x');
      // A second worker proves the task was claimable all along.
      const seen = deferred();
      const other = queues.process(q, () => seen.resolve());
      await seen.promise;
      expect(runs).toBe(0);
      await other.close();
    });

    it('rejects bad options naming the option, and a bad queue or handler with QueueError', () => {
      const handler = () => undefined;
      expect(() => queues.process('', handler)).toThrow(QueueError);
      expect(() => queues.process('q', 'nope' as never)).toThrow(QueueError);
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ concurrency: 0 }, 'concurrency'],
        [{ leaseMs: 0 }, 'leaseMs'],
        [{ maxAttempts: 1.5 }, 'maxAttempts'],
        [{ backoffMs: -1 }, 'backoffMs'],
        [{ drainTimeoutMs: 'soon' }, 'drainTimeoutMs'],
        [{ concurency: 2 }, 'concurency'],
      ];
      for (const [options, option] of cases) {
        let err: unknown;
        try {
          queues.process('q', handler, options as never);
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(RedisLockOptionsError);
        expect((err as RedisLockOptionsError).option).toBe(option);
      }
    });
  });

  describe('retries and dead letter', () => {
    it('computes backoff as backoffMs * 2^(attempt-1), capped at one hour, jittered to 50-100 %', () => {
      expect(retryDelayMs(1_000, 1, 0)).toBe(500);
      expect(retryDelayMs(1_000, 1, 0.999999)).toBe(1_000);
      expect(retryDelayMs(1_000, 3, 0)).toBe(2_000);
      expect(retryDelayMs(1_000, 3, 0.999999)).toBe(4_000);
      expect(retryDelayMs(1_000, 40, 0)).toBe(1_800_000);
      expect(retryDelayMs(1_000, 40, 0.999999)).toBeLessThanOrEqual(3_600_000);
      expect(retryDelayMs(1_000, 40, 0.999999)).toBeGreaterThan(3_599_990);
      expect(retryDelayMs(0, 5, 0.5)).toBe(0);
    });

    it('keeps the backoff a finite number past attempt 1024 (maxAttempts goes to 1,000,000)', () => {
      // 2^1024 is Infinity, and 0 * Infinity NaN: the nack failed in Redis on every try.
      for (const attempt of [1_025, 1_000_000]) {
        expect(retryDelayMs(0, attempt, 0.5)).toBe(0);
        expect(retryDelayMs(1_000, attempt, 0)).toBe(1_800_000);
        expect(backoffDelayMs({ type: 'exponential', delayMs: 0 }, attempt)).toBe(0);
        expect(
          backoffDelayMs({ type: 'exponential', delayMs: 5, maxDelayMs: 60_000 }, attempt),
        ).toBe(60_000);
      }
    });

    it('caps an exponential backoff without maxDelayMs at one hour, or at delayMs when longer', () => {
      // A default cap below delayMs made a 2-hour exponential backoff retry after one hour.
      const twoHours = { type: 'exponential', delayMs: 7_200_000 } as const;
      expect(backoffDelayMs(twoHours, 1)).toBe(7_200_000);
      expect(backoffDelayMs(twoHours, 5)).toBe(7_200_000);
      expect(backoffDelayMs({ ...twoHours, maxDelayMs: 86_400_000 }, 3)).toBe(28_800_000);
      expect(backoffDelayMs({ type: 'exponential', delayMs: 1_000 }, 40)).toBe(3_600_000);
    });

    it('retries a failing task with backoff, dead-letters it after maxAttempts, and runs it again after requeueDead', async () => {
      const q = fresh();
      const attempts: Record<string, LeasedTask[]> = { flaky: [], bad: [] };
      let healed = false;
      const worker = queues.process(
        q,
        async (task) => {
          attempts[task.id].push(task);
          if (task.id === 'flaky' && task.attempt < 3) throw new Error('flaky failure');
          if (task.id === 'bad' && !healed) throw new Error('bad failure');
        },
        { maxAttempts: 3, backoffMs: 40, leaseMs: 5_000, concurrency: 2 },
      );
      await queues.enqueue(q, ['flaky', 'bad'], { payload: 'p' });
      await waitFor('flaky to succeed and bad to die', async () => {
        const s = await queues.stats(q);
        return s.dead === 1 && s.ready + s.delayed + s.leased === 0;
      });
      expect(attempts.flaky.map((t) => t.attempt)).toEqual([1, 2, 3]);
      expect(attempts.bad.map((t) => t.attempt)).toEqual([1, 2, 3]);
      // Each retry was due no sooner than the jittered backoff after the failed attempt's claim.
      for (const list of [attempts.flaky, attempts.bad]) {
        for (let i = 1; i < list.length; i++) {
          const claimedAt = list[i - 1].leaseExpiresAt - 5_000;
          expect(list[i].score - claimedAt).toBeGreaterThanOrEqual(retryDelayMs(40, i, 0));
        }
      }
      const [dead] = await queues.deadLetters(q);
      expect(dead).toMatchObject({ id: 'bad', attempts: 3, payload: 'p' });

      healed = true;
      expect(await queues.requeueDead(q)).toBe(1);
      await waitFor('bad to succeed', async () => {
        const s = await queues.stats(q);
        return attempts.bad.length === 4 && s.leased + s.ready + s.dead === 0;
      });
      expect(attempts.bad[3].attempt).toBe(1);
      await worker.close();
    });

    it('fails the attempt of a handler that throws a value without a text form, with no unhandled rejection', async () => {
      const q = fresh();
      const unprintable = (): Record<string, () => unknown> => ({
        // What some parsers build for an error body: no prototype, so no toString.
        bare: () => Object.assign(Object.create(null), { code: 'E_UPSTREAM' }),
        badString: () => ({
          toString() {
            throw new Error('no text');
          },
        }),
        badMessage: () =>
          Object.defineProperty(new Error('x'), 'message', {
            get() {
              throw new Error('no message');
            },
          }),
        proxy: () =>
          new Proxy(
            {},
            {
              get() {
                throw new Error('trap');
              },
              getPrototypeOf() {
                throw new Error('trap');
              },
            },
          ),
      });
      const thrown = unprintable();
      const events = app.get(RedisLockEvents);
      const failed: string[] = [];
      const off = events.on('task.failed', (e) => e.queue === q && failed.push(e.id));
      const worker = queues.process(
        q,
        (task) => {
          throw thrown[task.id]();
        },
        { maxAttempts: 1 },
      );
      await queues.enqueue(q, Object.keys(thrown));
      await waitFor('every task dead', async () => (await queues.stats(q)).dead === 4);
      off();
      await worker.close();
      expect(failed.sort()).toEqual(['badMessage', 'badString', 'bare', 'proxy']);
      expect((await queues.get(q, 'bare'))?.error).toEqual({
        name: 'Error',
        message: '[object Object]',
      });
      expect((await queues.get(q, 'badMessage'))?.error).toMatchObject({ message: '' });
      // Not even `instanceof` works on it: stored as the worker's own QueueError.
      expect((await queues.get(q, 'proxy'))?.error?.message).toMatch(
        /task 'proxy' failed with a value that could not be stored/,
      );
    });

    it("logs a failure's message cut as it is stored (1,000 characters), then its length", async () => {
      const q = fresh();
      const lines: string[] = [];
      for (const level of ['warn', 'error'] as const) {
        jest.spyOn(Logger.prototype, level).mockImplementation((...args: unknown[]) => {
          const message = String(args[0]);
          if (message.includes(`queue '${q}'`)) lines.push(message);
        });
      }
      // An HTTP client's error that carries the response body: 200,000 characters.
      const huge = `upstream said: ${'m'.repeat(200_000)}`;
      const worker = queues.process(q, () => Promise.reject(new Error(huge)), {
        maxAttempts: 2,
        backoffMs: 1,
      });
      try {
        await queues.enqueue(q, 't');
        await waitFor('the dead-letter line', () => lines.some((l) => l.includes('dead letter')));
        const cut = `${huge.slice(0, 1_000)}… (${huge.length} chars)`;
        expect(lines).toHaveLength(2);
        expect(lines[0]).toMatch(
          /^queue '.+': task 't' failed attempt 1 of 2, retrying in \d+ ms: /,
        );
        expect(lines[0].endsWith(`ms: ${cut}`)).toBe(true);
        expect(lines[1]).toBe(
          `queue '${q}': task 't' failed attempt 2 of 2 and moved to dead letter: ${cut}`,
        );
        expect((await queues.get(q, 't'))?.error?.message).toBe(huge.slice(0, 1_000));
      } finally {
        jest.restoreAllMocks();
        await worker.close();
      }
    });
  });

  describe('leases', () => {
    it('renews the lease while a handler outlives leaseMs, so no other worker runs the task', async () => {
      const q = fresh();
      const runs: string[] = [];
      // Extended while at least half of the lease is left (the worker looks every third).
      const options = { leaseMs: 600, concurrency: 2 };
      const slow = async (task: LeasedTask) => {
        runs.push(task.id);
        await sleep(1_800);
      };
      const workers = [queues.process(q, slow, options), queues.process(q, slow, options)];
      await queues.enqueue(q, 'long');
      await waitFor('done', async () => runs.length > 0 && (await queues.stats(q)).leased === 0);
      expect(runs).toEqual(['long']);
      await Promise.all(workers.map((w) => w.close()));
    });

    it('gives each task a signal of its own, except to a handler declared with one parameter', async () => {
      const seen = new Map<string, unknown[]>();
      const record = (kind: string, signal: unknown) =>
        seen.set(kind, [...(seen.get(kind) ?? []), signal]);
      /* eslint-disable prefer-rest-params -- what a handler without the parameter is passed */
      const handlers: Record<string, (task: LeasedTask, signal: AbortSignal) => void> = {
        none: function () {
          record('none', arguments[1]);
        },
        one: function (_task: LeasedTask) {
          record('one', arguments[1]);
        },
        two: (_task, signal) => record('two', signal),
        rest: (...args: unknown[]) => record('rest', args[1]),
      };
      /* eslint-enable prefer-rest-params */
      const workers = Object.entries(handlers).map(([kind, handler]) => {
        const q = `${fresh()}-${kind}`;
        void queues.enqueue(q, ['a', 'b']);
        return queues.process(q, handler, { concurrency: 2 });
      });
      await waitFor(
        'every task',
        () => [...seen.values()].every((s) => s.length === 2) && seen.size === 4,
      );
      await Promise.all(workers.map((w) => w.close()));
      expect(seen.get('one')).toEqual([undefined, undefined]);
      for (const kind of ['none', 'two', 'rest']) {
        const [first, second] = seen.get(kind)!;
        expect(first).toBeInstanceOf(AbortSignal);
        expect(second).toBeInstanceOf(AbortSignal);
        expect(first).not.toBe(second);
      }
    });

    it('aborts the handler signal with a QueueError when the lease is lost', async () => {
      const q = fresh();
      const reasons: unknown[] = [];
      const worker = queues.process(
        q,
        (_task, signal) =>
          new Promise<void>((resolve) =>
            signal.addEventListener('abort', () => {
              reasons.push(signal.reason);
              resolve();
            }),
          ),
        { leaseMs: 90 },
      );
      await queues.enqueue(q, 'lost');
      await waitFor('claimed', async () => (await queues.stats(q)).leased === 1);
      // Someone else's claim took it over: the token in Redis is no longer the worker's.
      await redis.hset(`${prefix}queue:{${q}}:tokens`, 'lost', 'someone-else');
      await waitFor('abort', () => reasons.length === 1);
      expect(reasons[0]).toBeInstanceOf(QueueError);
      expect((reasons[0] as Error).message).toMatch(/lease of task 'lost' was lost/);
      // Its ack was refused: the task is still leased under the other token.
      expect(await redis.hget(`${prefix}queue:{${q}}:tokens`, 'lost')).toBe('someone-else');
      await worker.close();
    });

    it('a handler that throws after its lease was lost: a warning, no task.failed (its nack changed nothing)', async () => {
      const q = fresh();
      const warnings: string[] = [];
      jest.spyOn(Logger.prototype, 'warn').mockImplementation((message: unknown) => {
        warnings.push(String(message));
      });
      const events = app.get(RedisLockEvents);
      const seen: string[] = [];
      const offs = (['task.failed', 'task.retried', 'task.dead'] as const).map((name) =>
        events.on(name, (e) => e.queue === q && seen.push(name)),
      );
      const worker = queues.process(
        q,
        (_task, signal) =>
          new Promise<void>((_resolve, reject) =>
            signal.addEventListener('abort', () => reject(new Error('stopped'))),
          ),
        { leaseMs: 90, drainTimeoutMs: 50 },
      );
      try {
        await queues.enqueue(q, 'lost');
        await waitFor('claimed', async () => (await queues.stats(q)).leased === 1);
        await redis.hset(`${prefix}queue:{${q}}:tokens`, 'lost', 'someone-else');
        const warned = () => warnings.find((w) => w.includes(`task 'lost' failed`));
        await waitFor('the warning', () => warned() !== undefined);
        expect(warned()).toBe(
          `queue '${q}': task 'lost' failed (stopped) after its lease was lost; another worker may run it again`,
        );
        expect(seen).toEqual([]);
      } finally {
        for (const off of offs) off();
        jest.restoreAllMocks();
        await worker.close();
      }
    });
  });

  describe('concurrency', () => {
    it('4 workers x concurrency 4 on two apps never run the same task at the same time', async () => {
      const q = fresh();
      const other = await createLockApp({ keyPrefix: prefix });
      try {
        const running = new Set<string>();
        const runs = new Map<string, number>();
        let overlaps = 0;
        let maxParallel = 0;
        const handler = async (task: LeasedTask) => {
          if (running.has(task.id)) overlaps++;
          running.add(task.id);
          maxParallel = Math.max(maxParallel, running.size);
          runs.set(task.id, (runs.get(task.id) ?? 0) + 1);
          // Some handlers outlive the 1 s lease: only renewal keeps them exclusive. (A 600 ms
          // lease lapsed twice in a day on the in-memory backend, whose scripts run in this
          // process, when the machine was loaded: an event loop held 400 ms starves the renewal.)
          await sleep(task.id.endsWith('7') ? 1_300 : Math.random() * 5);
          running.delete(task.id);
        };
        const options = { concurrency: 4, leaseMs: 1_000 };
        const services = [queues, queues, other.get(QueueService), other.get(QueueService)];
        const workers = services.map((s) => s.process(q, handler, options));
        try {
          const ids = Array.from({ length: 400 }, (_, i) => `t${i}`);
          await queues.enqueue(q, ids);
          await waitFor(
            'all tasks acked',
            async () => runs.size === 400 && (await queues.stats(q)).leased === 0,
            20_000,
          );
          expect(overlaps).toBe(0);
          expect([...runs.values()].every((count) => count === 1)).toBe(true);
          expect(maxParallel).toBeGreaterThan(4);
          expect(maxParallel).toBeLessThanOrEqual(16);
        } finally {
          await Promise.all(workers.map((w) => w.close()));
        }
      } finally {
        await other.close();
      }
    }, 30_000);
  });

  describe('@QueueWorker', () => {
    it('checks the queue name and options when decorating', () => {
      expect(() => QueueWorker('')).toThrow(QueueError);
      expect(() => QueueWorker('ok', { concurrency: 0 })).toThrow(RedisLockOptionsError);
      expect(() => QueueWorker('ok', { leaseMs: 5, unknown: 1 } as never)).toThrow(
        /invalid option 'unknown'/,
      );
    });

    it('starts a worker per decorated provider method at bootstrap, bound to its instance', async () => {
      const q = fresh();
      @Injectable()
      class OrderWorker {
        readonly seen: string[] = [];
        readonly other: string[] = [];

        readonly signals: unknown[] = [];

        @QueueWorker(q, { concurrency: 2 })
        async create(task: LeasedTask<{ sku: string }>) {
          this.seen.push(`${task.id}:${task.payload!.sku}`);
          // Declared without `signal`: the worker creates none (see process).
          // eslint-disable-next-line prefer-rest-params
          this.signals.push(arguments[1]);
        }

        @QueueWorker(`${q}-a`)
        @QueueWorker(`${q}-b`)
        async both(task: LeasedTask, signal: AbortSignal) {
          this.other.push(`${task.queue}/${task.id}`);
          this.signals.push(signal);
        }

        notAWorker() {
          return 1;
        }
      }
      const moduleRef = await Test.createTestingModule({
        imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefix })],
        providers: [OrderWorker],
      }).compile();
      const decorated = await moduleRef.init();
      try {
        const service = decorated.get(QueueService);
        const worker = decorated.get(OrderWorker);
        await service.enqueue(q, ['1', '2'], { payload: { sku: 'phone' } });
        await service.enqueue(`${q}-a`, 'x');
        await service.enqueue(`${q}-b`, 'y');
        await waitFor(
          'decorated handlers',
          () => worker.seen.length === 2 && worker.other.length === 2,
        );
        expect(worker.seen.sort()).toEqual(['1:phone', '2:phone']);
        expect(worker.other.sort()).toEqual([`${q}-a/x`, `${q}-b/y`]);
        expect(worker.signals.filter((s) => s === undefined)).toHaveLength(2);
        expect(worker.signals.filter((s) => s instanceof AbortSignal)).toHaveLength(2);
      } finally {
        await decorated.close();
      }
    });
  });

  describe('graceful shutdown', () => {
    it('stops claiming, waits for running handlers, and gives back those past drainTimeoutMs without counting the attempt', async () => {
      const q = fresh();
      const closing = await createLockApp({ keyPrefix: prefix });
      let closingDone: Promise<unknown> | undefined;
      try {
        const quick = deferred();
        const started = new Set<string>();
        const finished: string[] = [];
        const reasons: unknown[] = [];
        closing.get(QueueService).process(
          q,
          async (task, signal) => {
            started.add(task.id);
            if (task.id === 'quick') await quick.promise;
            else
              await new Promise<void>((resolve) =>
                signal.addEventListener('abort', () => {
                  reasons.push(signal.reason);
                  resolve();
                }),
              );
            finished.push(task.id);
          },
          { concurrency: 2, drainTimeoutMs: 400 },
        );
        await queues.enqueue(q, ['quick', 'stuck']);
        await waitFor('both running', () => started.size === 2);

        let closed = false;
        closingDone = closing.close().then(() => (closed = true));
        await queues.enqueue(q, 'late');
        quick.resolve();
        await waitFor('quick acked', async () => finished.includes('quick'));
        expect(closed).toBe(false);
        await closingDone;

        expect(reasons).toHaveLength(1);
        expect(reasons[0]).toBeInstanceOf(QueueError);
        // quick was acked; stuck was given back (attempt not counted); late was never claimed.
        expect(await queues.stats(q)).toMatchObject(queueStats({ ready: 2 }));
        // (quick, completed, is kept with its attempt count)
        expect(await redis.hgetall(`${prefix}queue:{${q}}:attempts`)).toEqual({ quick: '1' });
        expect(started.has('late')).toBe(false);
        const [first] = await queues.claim(q, 2);
        expect(first.attempt).toBe(1);
      } finally {
        await (closingDone ?? closing.close());
      }
    });

    it('app.close() waits for handlers that finish within drainTimeoutMs', async () => {
      const q = fresh();
      const closing = await createLockApp({ keyPrefix: prefix, queue: { drainTimeoutMs: 10_000 } });
      let closed: Promise<void> | undefined;
      try {
        const release = deferred();
        let started = false;
        let done = false;
        closing.get(QueueService).process(q, async () => {
          started = true;
          await release.promise;
          await sleep(50);
          done = true;
        });
        await queues.enqueue(q, 'drain');
        // The handler itself, not only the lease: a task leased but not yet started when close
        // begins is given back unstarted (the claim's reply was still on its way).
        await waitFor('running', () => started);
        closed = closing.close();
        release.resolve();
        await closed;
        expect(done).toBe(true);
        expect(await queues.stats(q)).toMatchObject(queueStats());
      } finally {
        await (closed ?? closing.close());
      }
    });
  });
});

describe('QueueService workers: wake-ups and reconnects (dedicated redis-server)', () => {
  let server: RedisServer;
  let app: INestApplicationContext;
  let queues: QueueService;
  let probe: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    app = await createLockApp({ redis: server.url, commandTimeoutMs: 1_000 });
    queues = app.get(QueueService);
    probe = redisClient(server.url);
    // Load the scripts, so that no NOSCRIPT retry is counted below.
    await queues.enqueue('warm-up', 'x', { payload: 1 });
    await queues.pop('warm-up');
  });
  afterAll(async () => {
    await app.close();
    probe.disconnect();
    await server.stop();
  });

  /**
   * Starts a worker on `queue` and resolves once it is idle (blocked in Redis). `first` resolves
   * when it runs its first task, with when that was and the script calls the server had run then.
   */
  const idleWorker = async (queue: string) => {
    const first = deferred<{ at: number; calls: number }>();
    const worker = queues.process(queue, async () => {
      const at = Date.now();
      first.resolve({ at, calls: await scriptCalls(probe) });
    });
    try {
      await waitFor('the worker blocked', async () => (await blockedClients(probe)) === 1);
    } catch (err) {
      await worker.close();
      throw err;
    }
    return { worker, first: first.promise };
  };

  it('an idle worker blocks without polling and wakes within one round trip of an enqueue', async () => {
    const { worker, first } = await idleWorker('wake');
    try {
      const idleFrom = await scriptCalls(probe);
      await sleep(1_000);
      // Idle for a second: at most one look at the queue (its bounded wait may end in between).
      expect((await scriptCalls(probe)) - idleFrom).toBeLessThanOrEqual(1);

      const before = await scriptCalls(probe);
      const enqueuedAt = Date.now();
      await queues.enqueue('wake', 'now');
      const ran = await first;
      // The enqueue itself and exactly one claim: the wake-up cost one round trip.
      expect(ran.calls - before).toBe(2);
      // Woken by the enqueue, not by the end of its bounded idle wait (MAX_IDLE_MS, 5 s, begun
      // about 1 s before the enqueue, so ~3.9 s later at the earliest): 1 s is generous for a
      // loaded machine and still far below that.
      expect(ran.at - enqueuedAt).toBeLessThan(1_000);
    } finally {
      await worker.close();
    }
  });

  it('a delayed task wakes the idle worker when it is due, not by polling', async () => {
    const delayMs = 500;
    const { worker, first } = await idleWorker('delayed');
    try {
      const before = await scriptCalls(probe);
      const enqueuedAt = Date.now();
      await queues.enqueue('delayed', 'soon', { delayMs });
      const ran = await first;
      // enqueue + the claim woken by its marker (nothing due yet) + the claim when it is due.
      expect(ran.calls - before).toBeLessThanOrEqual(4);
      // Not before it was due (5 ms for the two clocks' rounding), and long before the worker's
      // bounded idle wait (5 s) would have ended.
      expect(ran.at - enqueuedAt).toBeGreaterThanOrEqual(delayMs - 5);
      expect(ran.at - enqueuedAt).toBeLessThan(2_000);
    } finally {
      await worker.close();
    }
  });

  it('a burst wakes every idle worker, each woken by the claim before it', async () => {
    const running = new Set<number>();
    const release = deferred();
    const workers = [0, 1, 2].map((i) =>
      queues.process('burst', async () => {
        running.add(i);
        await release.promise;
        running.delete(i);
      }),
    );
    try {
      await waitFor('three workers blocked', async () => (await blockedClients(probe)) === 3);
      await queues.enqueue('burst', ['a', 'b', 'c']);
      // Within 1.5 s: their bounded idle waits (5 s, just begun) cannot have woken them.
      await waitFor('all three busy', () => running.size === 3, 1_500);
    } finally {
      release.resolve();
      await Promise.all(workers.map((w) => w.close()));
    }
  });

  it('a closing worker takes no wake-up while its handlers drain: an enqueue meanwhile wakes a worker that stays', async () => {
    const release = deferred();
    const started: string[] = [];
    // Concurrency 2 with one long task: a free slot, so it blocks on the wake-up list, first.
    const closing = queues.process(
      'closing',
      async (task) => {
        started.push(`closing:${task.id}`);
        await release.promise;
      },
      { concurrency: 2 },
    );
    let staying: QueueWorkerHandle | undefined;
    let closed: Promise<void> | undefined;
    try {
      await queues.enqueue('closing', 'long');
      await waitFor(
        'long running, the closing worker blocked',
        async () => started.length === 1 && (await blockedClients(probe)) === 1,
      );
      staying = queues.process('closing', async (task) => void started.push(`staying:${task.id}`));
      await waitFor('both blocked', async () => (await blockedClients(probe)) === 2);
      closed = closing.close();
      // Its blocked read leaves Redis at once: not when its handler is done, nor when that read's
      // bounded wait (5 s, begun just before) ends, which would take far more than 1.5 s.
      await waitFor(
        'only the staying worker blocked',
        async () => (await blockedClients(probe)) === 1,
        1_500,
      );
      await queues.enqueue('closing', 'next');
      // Within 1.5 s: the staying worker's bounded idle wait (5 s, just begun) cannot have ended.
      await waitFor('next started', () => started.includes('staying:next'), 1_500);
      expect(started).toEqual(['closing:long', 'staying:next']);
    } finally {
      release.resolve();
      await (closed ?? closing.close());
      await staying?.close();
    }
  });

  it('keeps working after Redis restarts', async () => {
    const seen: string[] = [];
    const worker = queues.process('restart', async (task) => void seen.push(task.id));
    await queues.enqueue('restart', 'before');
    await waitFor('before', () => seen.includes('before'));
    await server.restart();
    await waitFor(
      'the enqueue after the restart',
      async () => (await queues.enqueue('restart', 'after').catch(() => -1)) === 1,
      15_000,
      100,
    );
    await waitFor('after', () => seen.includes('after'), 15_000);
    await worker.close();
  }, 40_000);
});
