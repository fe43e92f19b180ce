import 'reflect-metadata';
import { Logger, type INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  FencedStore,
  QueueError,
  QueueService,
  RedisLockEvents,
  TaskTimeoutError,
  UnrecoverableTaskError,
  type LeasedTask,
  type QueueHandler,
  type QueueWorkerHandle,
  type QueueWorkerOptions,
  type RedisLockEventMap,
  type RunningTask,
} from '../../lib';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { exited, lineFrom, spawnTs } from '../support/child';
import {
  createLockApp,
  deferred,
  queueStats,
  redisClient,
  redisTimeMs,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';

/** Resolves when `signal` aborts (at once if it did). */
function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

const MAX_RESULT_BYTES = 1_024;

describe('A task’s life in a worker', () => {
  const prefix = uniquePrefix('queue-lifecycle');
  let app: INestApplicationContext;
  let queues: QueueService;
  let events: RedisLockEvents;
  let redis: Redis;
  const workers: QueueWorkerHandle[] = [];
  let n = 0;
  const fresh = () => `l${++n}`;

  /** Starts a worker that this file closes after the test. */
  const work = <P>(queue: string, handler: QueueHandler<P>, options?: QueueWorkerOptions) => {
    const worker = queues.process<P>(queue, handler, options);
    workers.push(worker);
    return worker;
  };
  const stateOf = async (q: string, id: string) => (await queues.get(q, id))?.state;
  const waitState = (q: string, id: string, state: string, timeoutMs = 20_000) =>
    waitFor(`task '${id}' ${state}`, async () => (await stateOf(q, id)) === state, timeoutMs);
  /** The fields of the queue's stream entries (t type, i id, a attempt, d delay, ...), oldest first. */
  const streamOf = async (q: string) =>
    (await redis.xrange(queueRedisKeys(prefix, q).events, '-', '+')).map(([, fields]) => {
      const f = new Map<string, string>();
      for (let i = 0; i < fields.length; i += 2) f.set(fields[i], fields[i + 1]);
      return f;
    });
  /** Collects the in-process events `event` of queue `q` until `off()`. */
  const collect = <E extends keyof RedisLockEventMap>(event: E, q: string) => {
    const seen: RedisLockEventMap[E][] = [];
    const off = events.on(event, (e) => {
      if ((e as { queue?: string }).queue === q) seen.push(e);
    });
    return { seen, off };
  };

  beforeAll(async () => {
    // Tasks die on purpose here: their dead-letter logs are expected; other errors still show.
    const logError = Logger.prototype.error;
    jest.spyOn(Logger.prototype, 'error').mockImplementation(function (
      this: Logger,
      message: unknown,
      ...rest: unknown[]
    ) {
      if (typeof message === 'string' && message.includes('moved to dead letter')) return;
      logError.call(this, message, ...rest);
    });
    app = await createLockApp({
      keyPrefix: prefix,
      queue: { backoffMs: 0, maxResultBytes: MAX_RESULT_BYTES },
    });
    queues = app.get(QueueService);
    events = app.get(RedisLockEvents);
    redis = redisClient();
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close()));
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  describe('run timeouts', () => {
    it('aborts the signal with TaskTimeoutError at the worker’s timeoutMs; the attempt fails, is retried, and maxAttempts 2 ends it dead after exactly 2 attempts', async () => {
      const q = fresh();
      const reasons: unknown[] = [];
      const timeouts = collect('task.timeout', q);
      work(
        q,
        async (task: RunningTask) => {
          await aborted(task.signal);
          reasons.push(task.signal.reason);
          throw task.signal.reason;
        },
        { timeoutMs: 50, maxAttempts: 2 },
      );
      await queues.enqueue(q, 'slow');
      await waitState(q, 'slow', 'dead');
      timeouts.off();
      expect(reasons).toHaveLength(2);
      for (const reason of reasons) {
        expect(reason).toBeInstanceOf(TaskTimeoutError);
        expect(reason).toMatchObject({ queue: q, taskId: 'slow', timeoutMs: 50 });
      }
      expect(timeouts.seen.map((e) => [e.id, e.attempt, e.timeoutMs])).toEqual([
        ['slow', 1, 50],
        ['slow', 2, 50],
      ]);
      expect(await queues.get(q, 'slow')).toMatchObject({
        state: 'dead',
        attempts: 2,
        error: { name: 'TaskTimeoutError', message: expect.stringContaining('timeout of 50 ms') },
      });
      const stream = (await streamOf(q)).filter((f) => f.get('i') === 'slow');
      expect(stream.map((f) => `${f.get('t')}:${f.get('a') ?? ''}`)).toEqual([
        'enqueued:',
        'active:1',
        'retrying:1',
        'active:2',
        'dead:2',
      ]);
    });

    it('a task’s own timeoutMs wins over the worker’s, shorter or longer; a timed-out attempt is retried and may then complete', async () => {
      const q = fresh();
      const release = deferred();
      const runs: string[] = [];
      const timeouts = collect('task.timeout', q);
      // Waits on its signal ('own-short' on its first attempt only) or, 'own-long', on the test.
      const handler = async (task: RunningTask) => {
        runs.push(`${task.id}:${task.attempt}`);
        if (task.id === 'own-short' && task.attempt === 1) await aborted(task.signal);
        if (task.id === 'worker-short') await aborted(task.signal);
        if (task.id === 'own-long') await release.promise;
        if (task.signal.aborted) throw task.signal.reason;
        return `${task.id} done`;
      };
      work(q, handler, { timeoutMs: 60_000 });
      // Worker timeout 60 s: 'own-short' times out at its own 50 ms, once, then completes.
      await queues.enqueue(q, 'own-short', { timeoutMs: 50 });
      await waitState(q, 'own-short', 'completed');
      expect(await queues.get(q, 'own-short')).toMatchObject({
        attempts: 2,
        result: 'own-short done',
      });
      expect(timeouts.seen.map((e) => [e.id, e.attempt, e.timeoutMs])).toEqual([
        ['own-short', 1, 50],
      ]);

      // A worker timeout of 50 ms: 'own-long' (60 s of its own) outlives a sibling's timeout.
      const q2 = fresh();
      const timeouts2 = collect('task.timeout', q2);
      work(q2, handler, { timeoutMs: 50, concurrency: 2 });
      await queues.enqueue(q2, 'own-long', { timeoutMs: 60_000 });
      await queues.enqueue(q2, 'worker-short', { maxAttempts: 1 });
      await waitState(q2, 'worker-short', 'dead');
      // The sibling timed out at the worker's 50 ms; 'own-long' still runs, on its first lease.
      expect(await stateOf(q2, 'own-long')).toBe('leased');
      release.resolve();
      await waitState(q2, 'own-long', 'completed');
      timeouts.off();
      timeouts2.off();
      expect(await queues.get(q2, 'own-long')).toMatchObject({
        attempts: 1,
        result: 'own-long done',
      });
      expect(timeouts2.seen.map((e) => [e.id, e.attempt, e.timeoutMs])).toEqual([
        ['worker-short', 1, 50],
      ]);
      expect(runs.filter((r) => r.startsWith('own-long'))).toEqual(['own-long:1']);
    });

    it('a handler that ignores its signal does not keep its slot: the next task starts, and its late return is ignored', async () => {
      const q = fresh();
      const release = deferred();
      const lateReturn = deferred();
      const started: string[] = [];
      work(
        q,
        async (task: RunningTask) => {
          started.push(task.id);
          if (task.id === 'stuck') {
            // Ignores task.signal: keeps running past its timeout.
            await release.promise;
            lateReturn.resolve();
            return 'late';
          }
          return 'next done';
        },
        { timeoutMs: 50, concurrency: 1 },
      );
      await queues.enqueue(q, 'stuck', { maxAttempts: 1 });
      await queues.enqueue(q, 'next');
      await waitState(q, 'next', 'completed');
      // Concurrency 1, and 'stuck' still runs: its slot was given to 'next' at its timeout.
      expect(started).toEqual(['stuck', 'next']);
      expect(await queues.get(q, 'stuck')).toMatchObject({
        state: 'dead',
        attempts: 1,
        error: { name: 'TaskTimeoutError' },
      });
      release.resolve();
      await lateReturn.promise;
      await Promise.all(workers.splice(0).map((w) => w.close()));
      expect(await queues.get(q, 'stuck')).toMatchObject({ state: 'dead', attempts: 1 });
      expect((await queues.get(q, 'stuck'))?.result).toBeUndefined();
      expect(await queues.stats(q)).toMatchObject(queueStats({ dead: 1, completed: 1 }));
    });
  });

  describe('failure policy', () => {
    it('UnrecoverableTaskError: dead after exactly 1 attempt, whatever maxAttempts', async () => {
      const q = fresh();
      const runs: string[] = [];
      const retried = collect('task.retried', q);
      work(
        q,
        async (task: RunningTask) => {
          runs.push(`${task.id}:${task.attempt}`);
          throw new UnrecoverableTaskError(`order ${task.id} does not exist`);
        },
        { maxAttempts: 5 },
      );
      await queues.enqueue(q, 'u1');
      await queues.enqueue(q, 'u2', { maxAttempts: 10 });
      await waitState(q, 'u1', 'dead');
      await waitState(q, 'u2', 'dead');
      retried.off();
      expect(runs.sort()).toEqual(['u1:1', 'u2:1']);
      expect(retried.seen).toEqual([]);
      expect(await queues.get(q, 'u2')).toMatchObject({
        state: 'dead',
        attempts: 1,
        error: { name: 'UnrecoverableTaskError', message: 'order u2 does not exist' },
      });
      const types = (await streamOf(q)).map((f) => f.get('t'));
      expect(types.filter((t) => t === 'retrying')).toEqual([]);
      expect(types.filter((t) => t === 'dead')).toEqual(['dead', 'dead']);
    });

    it('a task’s own maxAttempts 2 on a worker with 5: dead after exactly 2 attempts (its sibling after 5)', async () => {
      const q = fresh();
      const runs = new Map<string, number>();
      work(
        q,
        async (task: RunningTask) => {
          runs.set(task.id, (runs.get(task.id) ?? 0) + 1);
          throw new Error(`boom ${task.attempt}`);
        },
        { maxAttempts: 5 },
      );
      await queues.enqueue(q, 'own-2', { maxAttempts: 2 });
      await queues.enqueue(q, 'worker-5');
      await waitState(q, 'own-2', 'dead');
      await waitState(q, 'worker-5', 'dead');
      expect(Object.fromEntries(runs)).toEqual({ 'own-2': 2, 'worker-5': 5 });
      expect(await queues.get(q, 'own-2')).toMatchObject({
        attempts: 2,
        error: { name: 'Error', message: 'boom 2' },
      });
      expect((await queues.get(q, 'worker-5'))?.attempts).toBe(5);
    });

    it('a task’s own backoff { fixed, delayMs } sets its retry delay (event and due time); a sibling keeps the worker’s', async () => {
      const q = fresh();
      const retried = collect('task.retried', q);
      const failed = deferred();
      work(
        q,
        async (task: RunningTask) => {
          if (task.id === 'sibling' && task.attempt === 2) {
            failed.resolve();
            return 'ok';
          }
          throw new Error('try later');
        },
        { backoff: { type: 'fixed', delayMs: 0 } },
      );
      const before = await redisTimeMs(redis);
      await queues.enqueue(q, 'own', { backoff: { type: 'fixed', delayMs: 30_000 } });
      await queues.enqueue(q, 'sibling');
      await failed.promise;
      await waitState(q, 'own', 'delayed');
      const after = await redisTimeMs(redis);
      retried.off();
      expect(retried.seen.map((e) => [e.id, e.attempt, e.delayMs]).sort()).toEqual([
        ['own', 1, 30_000],
        ['sibling', 1, 0],
      ]);
      const own = await queues.get(q, 'own');
      expect(own).toMatchObject({ state: 'delayed', attempts: 1, lastError: 'try later' });
      // Due 30 s after its failure, on the Redis clock.
      expect(own!.time).toBeGreaterThanOrEqual(before + 30_000);
      expect(own!.time).toBeLessThanOrEqual(after + 30_000);
      const retrying = (await streamOf(q)).filter((f) => f.get('t') === 'retrying');
      expect(retrying.map((f) => [f.get('i'), f.get('d')]).sort()).toEqual([
        ['own', '30000'],
        ['sibling', '0'],
      ]);
    });

    it('rejects a task’s own maxAttempts, backoff or timeoutMs out of range at enqueue, naming the option; nothing is enqueued', async () => {
      const q = fresh();
      const bad: [string, Record<string, unknown>][] = [
        ['maxAttempts', { maxAttempts: 0 }],
        ['maxAttempts', { maxAttempts: 1.5 }],
        ['backoff.type', { backoff: { type: 'linear', delayMs: 10 } }],
        ['backoff.delayMs', { backoff: { type: 'fixed', delayMs: -1 } }],
        ['backoff.maxDelayMs', { backoff: { type: 'exponential', delayMs: 100, maxDelayMs: 10 } }],
        ['timeoutMs', { timeoutMs: 0 }],
        ['timeoutMs', { timeoutMs: 86_400_001 }],
      ];
      for (const [option, options] of bad) {
        const error: unknown = await queues.enqueue(q, 'x', options).catch((e: unknown) => e);
        expect([option, error]).toEqual([option, expect.any(QueueError)]);
        expect((error as Error).message).toContain(`'${option}'`);
      }
      expect(await queues.get(q, 'x')).toBeUndefined();
    });

    it('a backoff function that throws or returns no number falls back to the exponential backoffMs', async () => {
      const q = fresh();
      const retried = collect('task.retried', q);
      work(
        q,
        async (task: RunningTask) => {
          throw new Error(`failure ${task.attempt}`);
        },
        {
          concurrency: 2,
          backoffMs: 10_000,
          backoff: (_attempt, _error, task) => {
            if (task.id === 'throws') throw new Error('bad backoff');
            return NaN;
          },
        },
      );
      await queues.enqueue(q, ['throws', 'nan']);
      await waitFor('2 retries', () => retried.seen.length === 2, 20_000);
      retried.off();
      // backoffMs 10 s after attempt 1, jittered to 50-100 %.
      for (const e of retried.seen) {
        expect([e.id, e.attempt]).toEqual([e.id, 1]);
        expect(e.delayMs).toBeGreaterThanOrEqual(5_000);
        expect(e.delayMs).toBeLessThanOrEqual(10_000);
        expect(await stateOf(q, e.id)).toBe('delayed');
      }
    });

    it('a worker backoff function gets (attempt, error, task) and its delay is used', async () => {
      const q = fresh();
      const calls: [number, unknown, LeasedTask][] = [];
      const retried = collect('task.retried', q);
      work(
        q,
        async (task: RunningTask) => {
          throw new Error(`failure ${task.attempt}`);
        },
        {
          maxAttempts: 5,
          backoff: (attempt, error, task) => {
            calls.push([attempt, error, task]);
            return attempt === 1 ? 0 : 45_000;
          },
        },
      );
      await queues.enqueue(q, 'fn', { payload: { p: 1 } });
      await waitFor('2 retries', () => retried.seen.length === 2, 20_000);
      await waitState(q, 'fn', 'delayed');
      retried.off();
      expect(
        calls.map(([attempt, error, task]) => [attempt, (error as Error).message, task.id]),
      ).toEqual([
        [1, 'failure 1', 'fn'],
        [2, 'failure 2', 'fn'],
      ]);
      expect(calls.map(([, , task]) => [task.attempt, task.payload])).toEqual([
        [1, { p: 1 }],
        [2, { p: 1 }],
      ]);
      expect(retried.seen.map((e) => [e.attempt, e.delayMs])).toEqual([
        [1, 0],
        [2, 45_000],
      ]);
      expect(await queues.get(q, 'fn')).toMatchObject({ state: 'delayed', attempts: 2 });
    });
  });

  describe('inside a handler', () => {
    it('task.delay(ms): back to delayed without spending an attempt; what the handler returns or throws afterwards is ignored', async () => {
      const q = fresh();
      const runs: string[] = [];
      const ended = { returned: deferred(), threw: deferred() };
      const completed = collect('task.completed', q);
      const failed = collect('task.failed', q);
      work(
        q,
        async (task: RunningTask) => {
          runs.push(`${task.id}:${task.attempt}`);
          if (runs.filter((r) => r.startsWith(task.id)).length === 1) {
            await task.delay(60_000);
            if (task.id === 'returned') {
              ended.returned.resolve();
              return 'ignored';
            }
            ended.threw.resolve();
            throw new Error('ignored too');
          }
          return `${task.id} second run`;
        },
        { concurrency: 2 },
      );
      // maxAttempts 1: a delay that spent the attempt would leave no attempt for the second run.
      await queues.enqueue(q, ['returned', 'threw'], { maxAttempts: 1 });
      await Promise.all([ended.returned.promise, ended.threw.promise]);
      for (const id of ['returned', 'threw']) {
        expect(await queues.get(q, id)).toMatchObject({ state: 'delayed', attempts: 0 });
      }
      expect(await queues.stats(q)).toMatchObject(queueStats({ delayed: 2 }));
      // Due now again: each runs a second time, still as attempt 1.
      await queues.enqueue(q, ['returned', 'threw'], { replace: true });
      await waitState(q, 'returned', 'completed');
      await waitState(q, 'threw', 'completed');
      completed.off();
      failed.off();
      expect(runs.sort()).toEqual(['returned:1', 'returned:1', 'threw:1', 'threw:1']);
      expect(await queues.get(q, 'returned')).toMatchObject({
        attempts: 1,
        result: 'returned second run',
      });
      expect(completed.seen.map((e) => e.id).sort()).toEqual(['returned', 'threw']);
      expect(failed.seen).toEqual([]);
      const delayed = (await streamOf(q)).filter((f) => f.get('t') === 'delayed');
      expect(delayed.map((f) => [f.get('i'), f.get('d')]).sort()).toEqual([
        ['returned', '60000'],
        ['threw', '60000'],
      ]);
    });

    it("step jobs in BullMQ's order: task.delay(ms), then task.update({ step }) applies while the task waits; refused once it was claimed again", async () => {
      const q = fresh();
      const steps: string[] = [];
      const refused = deferred<unknown>();
      work(
        q,
        async (task: RunningTask<{ step: string }>) => {
          steps.push(`${task.id}:${task.payload!.step}`);
          // Delays of 300 ms: each update reaches Redis before the task is due again, even on a
          // loaded machine.
          if (task.id === 'order' && task.payload!.step === 'reserve') {
            await task.delay(300);
            await task.update({ step: 'charge' });
            await task.progress('reserved');
          } else if (task.id === 'order' && task.payload!.step === 'charge') {
            await task.delay(300);
            await task.update({ step: 'ship' });
          } else if (task.id === 'late') {
            if (steps.filter((s) => s.startsWith('late')).length > 1) return 'second run';
            await task.delay(0);
            // Claimed again (due at once) before this update: refused, naming the fix.
            await waitState(q, 'late', 'completed');
            refused.resolve(await task.update({ step: 'never' }).catch((err: unknown) => err));
          }
          return task.payload!.step;
        },
        { concurrency: 2 },
      );
      await queues.enqueue(q, 'order', { payload: { step: 'reserve' }, maxAttempts: 1 });
      await waitState(q, 'order', 'completed');
      expect(steps.filter((s) => s.startsWith('order'))).toEqual([
        'order:reserve',
        'order:charge',
        'order:ship',
      ]);
      expect(await queues.get(q, 'order')).toMatchObject({ attempts: 1, result: 'ship' });

      await queues.enqueue(q, 'late', { payload: { step: 'first' } });
      const err = await refused.promise;
      expect(err).toBeInstanceOf(QueueError);
      expect((err as Error).message).toBe(
        `queue '${q}': task 'late' was given back with task.delay() and has been claimed or has ` +
          'finished since; change its payload before task.delay(), or delay it longer',
      );
      expect(await queues.get(q, 'late')).toMatchObject({ payload: { step: 'first' } });
    });

    it('task.progress(v) is stored for get() and written to the stream; a non-JSON value (BigInt, circular) rejects with QueueError', async () => {
      const q = fresh();
      const inside = deferred();
      const release = deferred();
      const rejections: unknown[] = [];
      work(q, async (task: RunningTask) => {
        await task.progress(25);
        await task.progress({ step: 2, of: 3 });
        const circular: Record<string, unknown> = {};
        circular.self = circular;
        for (const bad of [10n, circular]) {
          rejections.push(
            await task.progress(bad).then(
              () => 'resolved',
              (e: unknown) => e,
            ),
          );
        }
        inside.resolve();
        await release.promise;
        return 'done';
      });
      await queues.enqueue(q, 'p');
      await inside.promise;
      expect(await queues.get(q, 'p')).toMatchObject({
        state: 'leased',
        progress: { step: 2, of: 3 },
      });
      expect(rejections).toHaveLength(2);
      for (const e of rejections) {
        expect(e).toBeInstanceOf(QueueError);
        expect(e).toMatchObject({ argument: 'progress' });
      }
      release.resolve();
      await waitState(q, 'p', 'completed');
      expect(await queues.get(q, 'p')).toMatchObject({
        attempts: 1,
        result: 'done',
        progress: { step: 2, of: 3 },
      });
      const progress = (await streamOf(q)).filter((f) => f.get('t') === 'progress');
      expect(progress.map((f) => f.get('p'))).toEqual(['25', '{"step":2,"of":3}']);
    });

    it('a non-JSON result (BigInt, circular) fails that attempt with a QueueError naming the task, and the worker goes on', async () => {
      const q = fresh();
      const failed = collect('task.failed', q);
      work(
        q,
        async (task: RunningTask<{ kind: string }>) => {
          if (task.payload.kind === 'bigint') return 10n;
          if (task.payload.kind === 'circular') {
            const o: Record<string, unknown> = {};
            o.self = o;
            return o;
          }
          return 'fine';
        },
        { concurrency: 1 },
      );
      await queues.enqueue(q, 'big', { payload: { kind: 'bigint' }, maxAttempts: 2 });
      await queues.enqueue(q, 'circ', { payload: { kind: 'circular' }, maxAttempts: 1 });
      await queues.enqueue(q, 'ok', { payload: { kind: 'json' } });
      await waitState(q, 'ok', 'completed');
      await waitState(q, 'big', 'dead');
      await waitState(q, 'circ', 'dead');
      failed.off();
      expect(failed.seen.map((e) => [e.id, e.attempt]).sort()).toEqual([
        ['big', 1],
        ['big', 2],
        ['circ', 1],
      ]);
      for (const e of failed.seen) {
        expect(e.error).toBeInstanceOf(QueueError);
        expect((e.error as Error).message).toContain(
          `task '${e.id}' returned a result that is not JSON`,
        );
      }
      expect(await queues.get(q, 'big')).toMatchObject({
        attempts: 2,
        error: { name: 'QueueError', message: expect.stringContaining(`queue '${q}': task 'big'`) },
      });
      expect(await queues.get(q, 'ok')).toMatchObject({ attempts: 1, result: 'fine' });
    });

    it('a result over queue.maxResultBytes fails with a message naming the limit; one at the limit is kept', async () => {
      const q = fresh();
      work(q, async (task: RunningTask<{ chars: number }>) => 'é'.repeat(task.payload.chars));
      // JSON of n 'é' is 2n + 2 bytes.
      const atLimit = (MAX_RESULT_BYTES - 2) / 2;
      await queues.enqueue(q, 'over', { payload: { chars: atLimit + 1 }, maxAttempts: 1 });
      await queues.enqueue(q, 'at', { payload: { chars: atLimit } });
      await waitState(q, 'over', 'dead');
      await waitState(q, 'at', 'completed');
      expect(await queues.get(q, 'over')).toMatchObject({
        attempts: 1,
        error: {
          name: 'QueueError',
          message: `queue '${q}': task 'over' returned a result of ${MAX_RESULT_BYTES + 2} bytes; the limit is ${MAX_RESULT_BYTES} (module option queue.maxResultBytes)`,
        },
      });
      expect(await queues.get(q, 'at')).toMatchObject({ result: 'é'.repeat(atLimit) });
    });

    it('ack(task, result) by hand keeps the result for get(); a stale or non-JSON ack changes nothing', async () => {
      const q = fresh();
      await queues.enqueue(q, 'manual', { payload: { a: 1 } });
      const [task] = await queues.claim(q);
      await expect(queues.ack(task, { n: 10n })).rejects.toThrow(QueueError);
      expect(await stateOf(q, 'manual')).toBe('leased');
      const before = await redisTimeMs(redis);
      expect(await queues.ack(task, { ok: true, list: [1, 2] })).toBe(true);
      const after = await redisTimeMs(redis);
      const info = await queues.get(q, 'manual');
      expect(info).toMatchObject({
        state: 'completed',
        attempts: 1,
        payload: { a: 1 },
        result: { ok: true, list: [1, 2] },
      });
      expect(info!.finishedAt).toBeGreaterThanOrEqual(before);
      expect(info!.finishedAt).toBeLessThanOrEqual(after);
      expect(await queues.ack(task, 'again')).toBe(false);
      expect((await queues.get(q, 'manual'))?.result).toEqual({ ok: true, list: [1, 2] });
    });
  });

  describe('task.fence', () => {
    it('rises with every lease: tasks leased together differ, and a task leased again gets a higher one', async () => {
      const q = fresh();
      await queues.enqueue(q, ['a', 'b']);
      const first = await queues.claim(q, 2);
      expect(new Set(first.map((t) => t.fence)).size).toBe(2);
      const a1 = first.find((t) => t.id === 'a')!;
      expect(await queues.nack(a1)).toBe('retried');
      const [a2] = await queues.claim(q, 1);
      expect(a2).toMatchObject({ id: 'a', attempt: 2 });
      expect(a2.fence).toBeGreaterThan(Math.max(...first.map((t) => t.fence)));
      expect(Number.isSafeInteger(a2.fence)).toBe(true);
    });

    it('rises above the last fence given out when that one is ahead of the Redis clock', async () => {
      const q = fresh();
      const key = queueRedisKeys(prefix, q).fence;
      // A counter ahead of the clock (µs): the next fences follow it, not the clock.
      const ahead = (Number((await redis.time())[0]) + 1_000_000) * 1_000_000;
      await redis.set(key, String(ahead));
      await queues.enqueue(q, ['a', 'b']);
      const leased = await queues.claim(q, 2);
      expect(leased.map((t) => t.fence).sort((x, y) => x - y)).toEqual([ahead + 1, ahead + 2]);
      expect(await redis.get(key)).toBe(String(ahead + 2));
      // Without a counter (lost in a failover), the clock: above the last fence of this test's
      // server clock, and rising.
      await redis.del(key);
      await queues.enqueue(q, 'c');
      const [c] = await queues.claim(q, 1);
      expect(c.fence).toBeGreaterThan(Number((await redis.time())[0]) * 1_000_000 - 60_000_000);
      expect(Number(await redis.get(key))).toBe(c.fence);
    });

    it('refuses the write of a worker frozen (SIGSTOP) past its lease once the worker that took the task over wrote: one write accepted, one refused', async () => {
      const q = fresh();
      const resource = `fence-${q}`;
      const fenced = app.get(FencedStore);
      const child = spawnTs('test/fixtures/queue-lifecycle-child.ts', [], {
        REDIS_URL: testRedisUrl(),
        PREFIX: prefix,
        RESOURCE: resource,
        WORKERS_JSON: JSON.stringify([
          { queue: q, mode: 'fence', options: { leaseMs: 500, maxAttempts: 3 } },
        ]),
      });
      try {
        await lineFrom(child, /^ready \d+$/, 120_000);
        const took = lineFrom(child, /^took job \d+ 1$/, 30_000);
        await queues.enqueue(q, 'job');
        const childFence = Number((await took).split(' ')[2]);
        // Frozen mid-task: no lease renewal, no write, until SIGCONT.
        child.kill('SIGSTOP');

        // The lease runs out; a worker here takes the task over and writes with its fence.
        const taken = deferred<{ fence: number; attempt: number; written: boolean }>();
        work(
          q,
          async (task: RunningTask) => {
            const written = await fenced.write(
              resource,
              { fence: task.fence, token: task.leaseToken },
              'taker',
            );
            taken.resolve({ fence: task.fence, attempt: task.attempt, written });
            return 'taker';
          },
          // Long: it must keep the task it took over until it wrote (a loaded machine).
          { leaseMs: 10_000 },
        );
        const taker = await taken.promise;
        expect(taker).toEqual({ fence: expect.any(Number), attempt: 2, written: true });
        expect(taker.fence).toBeGreaterThan(childFence);
        await waitState(q, 'job', 'completed');

        // The frozen worker wakes up believing it still runs the task, and writes.
        const wrote = lineFrom(child, /^wrote (true|false)$/, 30_000);
        await redis.set(`${prefix}obs:go`, '1');
        child.kill('SIGCONT');
        expect(await wrote).toBe('wrote false');

        expect(await redis.hgetall(`${prefix}obs:${q}:writes`)).toEqual({ child: '0' });
        expect(await fenced.read(resource)).toMatchObject({ value: 'taker', fence: taker.fence });
        // The child started it once; the taker's run was attempt 2, and its result is the one kept.
        expect(await redis.hget(`${prefix}obs:${q}:starts`, 'job')).toBe('1');
        expect(await queues.get(q, 'job')).toMatchObject({
          state: 'completed',
          attempts: 2,
          result: 'taker',
        });
      } finally {
        child.kill('SIGCONT');
        child.kill('SIGKILL');
        await exited(child);
      }
    }, 180_000);
  });

  describe('results (keepCompleted)', () => {
    it('keeps the result and finish time; enqueue of that id within the window is refused, after it accepted as a new task', async () => {
      const q = fresh();
      const double = async (task: RunningTask<{ n: number }>) => ({ n: task.payload.n * 2 });
      work(q, double, { keepCompleted: { ageMs: 60_000, count: 100 } });
      const before = await redisTimeMs(redis);
      await queues.enqueue(q, 'r', { payload: { n: 21 } });
      await waitState(q, 'r', 'completed');
      const after = await redisTimeMs(redis);
      const info = await queues.get(q, 'r');
      expect(info).toMatchObject({ attempts: 1, payload: { n: 21 }, result: { n: 42 } });
      expect(info!.finishedAt).toBeGreaterThanOrEqual(before);
      expect(info!.finishedAt).toBeLessThanOrEqual(after);
      expect(await queues.stats(q)).toMatchObject(queueStats({ completed: 1 }));
      expect(await queues.enqueue(q, 'r')).toBe(0);
      expect(await queues.enqueue(q, 'r', { replace: true, payload: { n: 1 } })).toBe(0);
      expect(await queues.get(q, 'r')).toMatchObject({ state: 'completed', result: { n: 42 } });
      expect((await queues.list(q, 'completed')).map((t) => t.id)).toEqual(['r']);

      // A window of 200 ms: once it ended, the id is a new task again.
      const q2 = fresh();
      work(q2, double, { keepCompleted: { ageMs: 200, count: 100 } });
      await queues.enqueue(q2, 'w', { payload: { n: 1 } });
      await waitState(q2, 'w', 'completed');
      await waitFor(
        'the window of w to end',
        async () => (await queues.enqueue(q2, 'w', { payload: { n: 5 } })) === 1,
        20_000,
        20,
      );
      await waitState(q2, 'w', 'completed');
      expect(await queues.get(q2, 'w')).toMatchObject({ attempts: 1, result: { n: 10 } });
    });

    /**
     * Works `q` keeping at most `count` completed tasks; each handler records the size of the
     * completed set as it starts, and returns its task's id.
     */
    function workKeeping(q: string, count: number, concurrency: number): number[] {
      const done = queueRedisKeys(prefix, q).done;
      const sizes: number[] = [];
      work(
        q,
        async (task: RunningTask) => {
          sizes.push(await redis.zcard(done));
          return task.id;
        },
        { concurrency, keepCompleted: { ageMs: 60_000, count } },
      );
      return sizes;
    }

    it('past keepCompleted.count, trims down to count less a tenth of it (at most 100), never keeping more than count', async () => {
      const q = fresh();
      const k = queueRedisKeys(prefix, q);
      const ids = Array.from({ length: 250 }, (_, i) => `s${String(i).padStart(3, '0')}`);
      const sizes = workKeeping(q, 100, 1);
      await queues.enqueue(q, ids);
      await waitState(q, 's249', 'completed');
      await waitFor('every task settled', async () => (await queues.stats(q)).leased === 0);
      expect(Math.max(...sizes)).toBe(100);
      // Once full, the set dropped to 90 (one trim of 11), then filled up again.
      const afterFull = sizes.slice(sizes.indexOf(100));
      expect(Math.min(...afterFull)).toBe(90);
      const kept = await redis.zcard(k.done);
      expect(kept).toBeGreaterThanOrEqual(90);
      expect(kept).toBeLessThanOrEqual(100);
      // The newest are the ones kept, with their data; the trimmed ones left nothing behind.
      expect(await queues.get(q, 's249')).toMatchObject({ state: 'completed', result: 's249' });
      expect(await redis.hlen(k.results)).toBe(kept);
      expect(await redis.hlen(k.info)).toBe(kept);
    });

    it('keeps at most keepCompleted.count tasks, trimming the oldest; count 0 keeps none', async () => {
      const q = fresh();
      const k = queueRedisKeys(prefix, q);
      const ids = Array.from({ length: 20 }, (_, i) => `t${String(i).padStart(2, '0')}`);
      const sizes = workKeeping(q, 5, 1);
      await queues.enqueue(q, ids, { payload: { kept: true } });
      await waitState(q, 't19', 'completed');
      expect(Math.max(...sizes)).toBe(5);
      expect(await queues.stats(q)).toMatchObject(queueStats({ completed: 5 }));
      const kept = await queues.list(q, 'completed');
      expect(kept.map((t) => [t.id, t.result])).toEqual(ids.slice(15).map((id) => [id, id]));
      expect(await queues.get(q, 't00')).toBeUndefined();
      // Nothing else stays of the trimmed tasks.
      for (const key of [k.results, k.payload, k.info, k.attempts]) {
        expect([key, await redis.hlen(key)]).toEqual([key, 5]);
      }
      // A trimmed id is a new task again.
      expect(await queues.enqueue(q, 't00')).toBe(1);
      await waitState(q, 't00', 'completed');

      const q2 = fresh();
      const completed = collect('task.completed', q2);
      work(q2, async () => 'not kept', { keepCompleted: { ageMs: 60_000, count: 0 } });
      await queues.enqueue(q2, 'gone', { payload: { kept: false } });
      await waitFor('gone completed', () => completed.seen.length === 1, 20_000);
      completed.off();
      expect(await queues.get(q2, 'gone')).toBeUndefined();
      expect(await queues.stats(q2)).toMatchObject(queueStats({ completed: 0 }));
      const k2 = queueRedisKeys(prefix, q2);
      expect(await redis.exists(k2.results, k2.payload, k2.info, k2.attempts, k2.done)).toBe(0);
    });
  });
});
