import 'reflect-metadata';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { filter, firstValueFrom, take, toArray } from 'rxjs';
import {
  QueueError,
  QueueService,
  createRedisLock,
  QueueWorker,
  RedisLockEvents,
  RedisLockOptionsError,
  UnknownTaskNameError,
  type RunningTask,
  type TaskEventBase,
} from '../../lib';
import { Redis } from 'ioredis';
import {
  commandCalls,
  createLockApp,
  deferred,
  sleep,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';
import { expectTasksPassedOn } from '../support/named-pass-on';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/** A handler that records how many of its tasks run at once, and the peak. */
function counting(ms = 15) {
  const c = {
    running: 0,
    peak: 0,
    done: [] as string[],
    handler: async (task: RunningTask) => {
      c.running++;
      c.peak = Math.max(c.peak, c.running);
      // Work that takes a while, so that tasks of one name overlap when they may.
      await sleep(ms);
      c.running--;
      c.done.push(task.id);
    },
  };
  return c;
}

describe('Named handlers: enqueue({ name }) routed to process(queue, handler, { name })', () => {
  const prefix = uniquePrefix('queue-named');
  let app: INestApplicationContext;
  let queues: QueueService;
  let n = 0;
  const fresh = () => `named${++n}`;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    queues = app.get(QueueService);
  });
  afterAll(() => app.close());

  it('stores the name: get, list, and the enqueued and active events show it', async () => {
    const q = fresh();
    const events = firstValueFrom(
      queues.events(q, { from: 'start' }).pipe(
        filter((e) => e.taskId === 'a'),
        take(2),
        toArray(),
      ),
    );
    await queues.enqueue(q, 'a', { name: 'welcome', payload: { to: 'x' } });
    await queues.enqueue(q, 'b', { payload: 1 });
    expect(await queues.get(q, 'a')).toMatchObject({ state: 'ready', name: 'welcome' });
    expect((await queues.get(q, 'b'))?.name).toBeUndefined();
    const listed = await queues.list(q, 'ready');
    expect(listed.map((t) => [t.id, t.name])).toEqual([
      ['a', 'welcome'],
      ['b', undefined],
    ]);
    const [task] = await queues.claim(q, 1);
    expect(task).toMatchObject({ id: 'a', name: 'welcome', payload: { to: 'x' } });
    // The name is not one of the task's own options.
    expect(task.options).toBeUndefined();
    expect((await events).map((e) => [e.type, e.name])).toEqual([
      ['enqueued', 'welcome'],
      ['active', 'welcome'],
    ]);
    await queues.ack(task);
    expect(await queues.get(q, 'a')).toMatchObject({ state: 'completed', name: 'welcome' });
  });

  it('names flow nodes, and keeps a task own maxAttempts beside its name', async () => {
    const q = fresh();
    await queues.enqueueFlow({
      queue: q,
      id: 'parent',
      options: { name: 'assemble' },
      children: [{ queue: q, id: 'child', options: { name: 'part', maxAttempts: 1 } }],
    });
    expect((await queues.get(q, 'parent'))?.name).toBe('assemble');
    const [child] = await queues.claim(q, 1);
    expect(child).toMatchObject({ id: 'child', name: 'part', options: { maxAttempts: 1 } });
    // maxAttempts 1 (its own, read by claim.lua beside the name): dead after one failure.
    expect(await queues.nack(child, { error: new Error('boom') })).toBe('dead');
  });

  it('refuses a bad name with a QueueError naming it', async () => {
    const q = fresh();
    // A lone surrogate: Redis's cjson would refuse the task's options.
    for (const bad of ['', 42, 'a\0b', 'x'.repeat(513), 'x\ud83d']) {
      await expect(
        queues.enqueue(q, 'a', { name: bad as unknown as string }),
      ).rejects.toMatchObject({ name: 'QueueError', argument: 'name' });
    }
    await expect(queues.enqueue(q, 'a', { name: '' })).rejects.toBeInstanceOf(QueueError);
  });

  it('runs each task in the handler of its name, each at most its own concurrency at once (peaks = limits), on one claim loop', async () => {
    const q = fresh();
    const welcome = counting();
    const invoice = counting();
    const w1 = queues.process(q, welcome.handler, { name: 'welcome', concurrency: 3 });
    const w2 = queues.process(q, invoice.handler, { name: 'invoice', concurrency: 1 });
    expect([w1.concurrency, w2.concurrency]).toEqual([3, 1]);
    await queues.enqueue(
      q,
      Array.from({ length: 12 }, (_, i) => `w${i}`),
      { name: 'welcome' },
    );
    await queues.enqueue(
      q,
      Array.from({ length: 6 }, (_, i) => `i${i}`),
      { name: 'invoice' },
    );
    await waitFor('18 tasks', () => welcome.done.length + invoice.done.length === 18, 10_000);
    expect(welcome.done.sort()).toEqual(Array.from({ length: 12 }, (_, i) => `w${i}`).sort());
    expect(invoice.done.sort()).toEqual(Array.from({ length: 6 }, (_, i) => `i${i}`).sort());
    expect([welcome.peak, invoice.peak]).toEqual([3, 1]);
    await waitFor('acks', async () => (await queues.stats(q)).completed === 18);
    await w1.close();
    await w2.close();
  });

  it('setConcurrency of a name changes that name only', async () => {
    const q = fresh();
    const a = counting();
    const b = counting();
    const wa = queues.process(q, a.handler, { name: 'a', concurrency: 1 });
    const wb = queues.process(q, b.handler, { name: 'b', concurrency: 1 });
    wa.setConcurrency(4);
    expect([wa.concurrency, wb.concurrency]).toEqual([4, 1]);
    await queues.enqueue(q, ['1', '2', '3', '4', '5', '6', '7', '8'], { name: 'a' });
    await queues.enqueue(q, ['x', 'y', 'z'], { name: 'b' });
    await waitFor('11 tasks', () => a.done.length + b.done.length === 11, 10_000);
    expect([a.peak, b.peak]).toEqual([4, 1]);
    await Promise.all([wa.close(), wb.close()]);
  });

  it("close() of one name's handle drains it as a worker's close does; nothing of that name runs there after", async () => {
    const q = fresh();
    const started: string[] = [];
    const aborted: string[] = [];
    const wa = queues.process(
      q,
      async (task: RunningTask, signal: AbortSignal) => {
        started.push(task.id);
        await new Promise<void>((resolve) => {
          signal.addEventListener('abort', () => {
            aborted.push(task.id);
            resolve();
          });
          setTimeout(resolve, 400);
        });
      },
      { name: 'a', concurrency: 1, drainTimeoutMs: 100 },
    );
    const wb = queues.process(q, async () => undefined, { name: 'b' });
    try {
      await queues.enqueue(q, ['a1', 'a2'], { name: 'a' });
      // a1 runs; a2 is claimed and waits for the name's one slot.
      await waitFor('a1 running, a2 waiting', async () => {
        return started.length === 1 && (await queues.stats(q)).leased === 2;
      });
      await wa.close();
      // a1 ran past drainTimeoutMs: its signal aborted and it was given back, as was a2, unrun.
      // No live worker runs 'a' any more (the registry entry was written at close): claimed
      // again by the loop, they end dead, each with one attempt (the give-backs did not count).
      expect(aborted).toEqual(['a1']);
      await waitFor('a1 and a2 dead', async () => (await queues.stats(q)).dead === 2);
      for (const id of ['a1', 'a2']) {
        expect(await queues.get(q, id)).toMatchObject({ state: 'dead', attempts: 1 });
        expect((await queues.get(q, id))?.lastError).toContain("is named 'a'");
      }
      await sleep(600);
      expect(started).toEqual(['a1']);
    } finally {
      await wb.close();
    }
  });

  it("close() of one name whose handler ignores its signal frees that name's slots of the loop: the other names run on at once", async () => {
    const q = fresh();
    const started = deferred();
    const stuck = deferred();
    const wa = queues.process(
      q,
      async () => {
        started.resolve();
        // Ignores its signal: returns only at the end of the test.
        await stuck.promise;
      },
      { name: 'a', concurrency: 1, drainTimeoutMs: 50 },
    );
    const b = counting(1);
    const wb = queues.process(q, b.handler, { name: 'b', concurrency: 1 });
    try {
      await queues.enqueue(q, 'a1', { name: 'a' });
      await started.promise;
      await wa.close();
      await queues.enqueue(q, ['b1', 'b2', 'b3'], { name: 'b' });
      // Before, the given-back a1 held one of the loop's two slots until its handler returned,
      // and the loop, now of b's concurrency (1), claimed nothing.
      await waitFor('the b tasks, a1 still in its handler', () => b.done.length === 3, 2_000);
      expect(b.done.sort()).toEqual(['b1', 'b2', 'b3']);
    } finally {
      stuck.resolve();
      await wb.close();
    }
  });

  it('a cancelled task waiting for a slot of its name ends cancelled at once, unrun, its name slot untouched', async () => {
    const q = fresh();
    const ran: string[] = [];
    const stuck = deferred();
    const wa = queues.process(
      q,
      async (task: RunningTask) => {
        ran.push(task.id);
        if (task.id === 'a1') await stuck.promise;
      },
      { name: 'a', concurrency: 1 },
    );
    const wb = queues.process(q, async () => undefined, { name: 'b', concurrency: 1 });
    try {
      await queues.enqueue(q, 'a1', { name: 'a' });
      await waitFor('a1 running', () => ran.length === 1);
      // Claimed into b's slot of the loop, a2 waits for a's one slot (a1 holds it).
      await queues.enqueue(q, ['a2', 'a3'], { name: 'a' });
      await waitFor('a2 and a3 waiting', async () => (await queues.stats(q)).leased === 2);
      expect(await queues.cancel(q, 'a2', { reason: 'not needed' })).toBe('signalled');
      // Before, a2 ended only once a1 returned and freed the slot.
      await waitFor(
        'a2 cancelled while a1 runs',
        async () => (await queues.get(q, 'a2'))?.state === 'cancelled',
        2_000,
      );
      expect(ran).toEqual(['a1']);
      stuck.resolve();
      await waitFor('a3', () => ran.length === 2);
      expect(ran).toEqual(['a1', 'a3']);
      expect((await queues.get(q, 'a2'))?.attempts).toBe(1);
    } finally {
      stuck.resolve();
      await Promise.all([wa.close(), wb.close()]);
    }
  });

  it("localWorkers gives each name's handle; workers() counts only the tasks whose handler runs; no listener warning for many waiting", async () => {
    const q = fresh();
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    const gate = deferred<void>();
    const wa = queues.process(q, () => gate.promise, { name: 'a', concurrency: 1 });
    const wb = queues.process(q, () => gate.promise, { name: 'b', concurrency: 2 });
    try {
      expect(queues.localWorkers(q)).toEqual([wa, wb]);
      expect(queues.localWorkers(q).map((w) => w.concurrency)).toEqual([1, 2]);
      // 1 runs, 2 wait for the slot of 'a': with 12 more waiting, 13 would be past Node's 10.
      queues.localWorkers(q)[1].setConcurrency(15);
      expect(wb.concurrency).toBe(15);
      await queues.enqueue(
        q,
        Array.from({ length: 14 }, (_, i) => `a${i}`),
        { name: 'a' },
      );
      await waitFor('14 leased', async () => (await queues.stats(q)).leased === 14);
      await waitFor(
        'the registry counting the running task only',
        async () => (await queues.workers(q))[0]?.running === 1,
        15_000,
        200,
      );
      expect(warnings).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
      gate.resolve();
      await Promise.all([wa.close(), wb.close()]);
    }
  }, 30_000);

  it('a named handler added in the same tick as close() never starts its loop (it would claim on a closed connection for ever)', async () => {
    const standalone = await createRedisLock({ redis: testRedisUrl(), keyPrefix: prefix });
    standalone.queues.process('late', async () => undefined, { name: 'a' });
    await standalone.close();
    await sleep(50);
    expect(standalone.queues.localWorkers('late')).toEqual([]);
    expect(standalone.queues.workerQueues()).toEqual([]);
  });

  it('ends a task whose name has no handler (or that has no name) dead at once with UnknownTaskNameError naming the name', async () => {
    const q = fresh();
    const events = app.get(RedisLockEvents);
    const dead: TaskEventBase[] = [];
    const off = events.on('task.dead', (e) => dead.push(e));
    const ran = counting(0);
    const worker = queues.process(q, ran.handler, { name: 'welcome', maxAttempts: 5 });
    await queues.enqueue(q, 'typo', { name: 'welcom' });
    await queues.enqueue(q, 'anonymous');
    await queues.enqueue(q, 'ok', { name: 'welcome' });
    await waitFor('two dead', async () => (await queues.stats(q)).dead === 2);
    const typo = await queues.get(q, 'typo');
    expect(typo).toMatchObject({ state: 'dead', attempts: 1, name: 'welcom' });
    expect(typo?.error).toMatchObject({ name: 'UnknownTaskNameError' });
    expect(typo?.lastError).toContain("is named 'welcom'");
    expect(typo?.lastError).toContain("'welcome'");
    expect((await queues.get(q, 'anonymous'))?.lastError).toContain('has no name');
    await waitFor('ok ran', () => ran.done.length === 1);
    expect(ran.done).toEqual(['ok']);
    expect(dead.map((e) => [e.id, e.name])).toEqual(
      expect.arrayContaining([
        ['typo', 'welcom'],
        ['anonymous', undefined],
      ]),
    );
    off();
    await worker.close();
    expect(new UnknownTaskNameError(q, 't', 'x', ['y'])).toBeInstanceOf(QueueError);
  });

  it('leaves a task whose name no handler here runs to a live worker that runs it (the workers registry): given back unattempted, not dead', () =>
    expectTasksPassedOn(queues, fresh()));

  it('a worker without a name runs every task, named or not', async () => {
    const q = fresh();
    const seen: [string, string | undefined][] = [];
    const worker = queues.process(q, (task) => void seen.push([task.id, task.name]));
    await queues.enqueue(q, 'a', { name: 'welcome' });
    await queues.enqueue(q, 'b');
    await waitFor('two tasks', () => seen.length === 2);
    expect(seen.sort()).toEqual([
      ['a', 'welcome'],
      ['b', undefined],
    ]);
    await worker.close();
  });

  it('refuses a second handler for a name, a loop option that differs between handlers, and name with batch', async () => {
    const q = fresh();
    const w = queues.process(q, () => undefined, { name: 'a', leaseMs: 10_000 });
    expect(() => queues.process(q, () => undefined, { name: 'a' })).toThrow(RedisLockOptionsError);
    expect(() => queues.process(q, () => undefined, { name: 'b', leaseMs: 20_000 })).toThrow(
      /leaseMs.*other named handlers of queue/,
    );
    // The same value, or none, is fine; per-name options may differ.
    const same = queues.process(q, () => undefined, { name: 'c', leaseMs: 10_000 });
    const per = queues.process(q, () => undefined, { name: 'd', concurrency: 7, timeoutMs: 50 });
    expect(() =>
      queues.process(q, () => undefined, { name: 'e', batch: { size: 2 } } as never),
    ).toThrow(/batch/);
    expect(() => queues.process(q, () => undefined, { name: 5 as unknown as string })).toThrow(
      RedisLockOptionsError,
    );
    await Promise.all([w.close(), same.close(), per.close()]);
  });

  it('takes a loop option given alike with its keys in another order; refuses a different one, both values as JSON in the message', async () => {
    const q = fresh();
    const limiter = { max: 100, durationMs: 1_000 };
    const backoff = { type: 'fixed', delayMs: 50, jitter: false } as const;
    const w = queues.process(q, () => undefined, { name: 'a', limiter, backoff });
    const same = queues.process(q, () => undefined, {
      name: 'b',
      limiter: { durationMs: 1_000, max: 100 },
      backoff: { jitter: false, delayMs: 50, type: 'fixed' },
    });
    let refused: unknown;
    try {
      queues.process(q, () => undefined, { name: 'c', limiter: { durationMs: 1_000, max: 200 } });
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(RedisLockOptionsError);
    expect((refused as Error).message).toBe(
      `invalid option 'limiter': expected the same value as the other named handlers of queue '${q}', ` +
        `'{"durationMs":1000,"max":100}' (they share one claim loop; give it on one of them), ` +
        `got '{"durationMs":1000,"max":200}'`,
    );
    expect(queues.localWorkers(q)).toHaveLength(2);
    await Promise.all([w.close(), same.close()]);
  });

  it("a named handler's own timeoutMs bounds its tasks only", async () => {
    const q = fresh();
    const slow = queues.process(q, (task) => sleep(200).then(() => task.id), {
      name: 'slow',
      timeoutMs: 20,
      maxAttempts: 1,
    });
    const fine = queues.process(q, (task) => sleep(40).then(() => task.id), { name: 'fine' });
    await queues.enqueue(q, 's', { name: 'slow' });
    await queues.enqueue(q, 'f', { name: 'fine' });
    await waitFor('both finished', async () => {
      const s = await queues.stats(q);
      return s.dead === 1 && s.completed === 1;
    });
    expect((await queues.get(q, 's'))?.error).toMatchObject({ name: 'TaskTimeoutError' });
    expect((await queues.get(q, 'f'))?.state).toBe('completed');
    await Promise.all([slow.close(), fine.close()]);
  });
});

@Injectable()
class EmailWorker {
  readonly seen: string[] = [];

  @QueueWorker('named-decorated', { name: 'welcome', concurrency: 2 })
  welcome(task: RunningTask<{ to: string }>) {
    this.seen.push(`welcome:${task.payload.to}`);
  }

  @QueueWorker('named-decorated', { name: 'invoice' })
  invoice(task: RunningTask<{ to: string }>) {
    this.seen.push(`invoice:${task.payload.to}`);
  }
}

describe('@QueueWorker(queue, { name })', () => {
  it('routes the tasks of each name to its method, events carrying the name', async () => {
    const app = await createLockApp({ keyPrefix: uniquePrefix('queue-named-dec') }, [EmailWorker]);
    try {
      const queues = app.get(QueueService);
      const completed: [string, string | undefined][] = [];
      app.get(RedisLockEvents).on('task.completed', (e) => completed.push([e.id, e.name]));
      await queues.enqueue('named-decorated', 'a', { name: 'welcome', payload: { to: 'ann' } });
      await queues.enqueue('named-decorated', 'b', { name: 'invoice', payload: { to: 'bob' } });
      const worker = app.get(EmailWorker);
      await waitFor('both', () => completed.length === 2);
      expect(worker.seen.sort()).toEqual(['invoice:bob', 'welcome:ann']);
      expect(completed.sort()).toEqual([
        ['a', 'welcome'],
        ['b', 'invoice'],
      ]);
    } finally {
      await app.close();
    }
  });
});

@Injectable()
class FirstWelcome {
  readonly seen: string[] = [];

  @QueueWorker('named-twice', { name: 'welcome' })
  welcome(task: RunningTask) {
    this.seen.push(task.id);
  }
}

@Injectable()
class SecondWelcome {
  @QueueWorker('named-twice', { name: 'welcome' })
  welcome() {
    return undefined;
  }
}

describe('@QueueWorker refused at bootstrap', () => {
  it('fails the start and stops the workers it had started: nothing runs in an app that did not start', async () => {
    const prefix = uniquePrefix('queue-named-twice');
    const err = await createLockApp({ keyPrefix: prefix }, [FirstWelcome, SecondWelcome]).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(RedisLockOptionsError);
    expect((err as Error).message).toContain(
      "a name without another handler on queue 'named-twice'",
    );
    const other = await createLockApp({ keyPrefix: prefix });
    try {
      const queues = other.get(QueueService);
      // The first handler's worker was started, then closed: its entry is gone.
      expect(await queues.workers('named-twice')).toEqual([]);
      await queues.enqueue('named-twice', 'after', { name: 'welcome' });
      await sleep(300);
      expect((await queues.stats('named-twice')).ready).toBe(1);
    } finally {
      await other.close();
    }
  });
});

describe('Named handlers: what a claim costs (dedicated redis-server)', () => {
  let server: RedisServer;
  let app: INestApplicationContext;
  let queues: QueueService;
  let probe: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    probe = new Redis(server.url);
    app = await createLockApp({ redis: server.url });
    queues = app.get(QueueService);
  });
  afterAll(async () => {
    await app.close();
    probe.disconnect();
    await server.stop();
  });

  /**
   * Commands the server ran while one worker drained 30 named tasks (enqueued before it started),
   * from its start until the last completed event, BLPOP and pub/sub aside (they depend on
   * timing, not on the tasks).
   */
  async function drainCost(q: string, named: boolean): Promise<Record<string, number>> {
    await queues.enqueue(
      q,
      Array.from({ length: 30 }, (_, i) => `t${i}`),
      { name: 'welcome' },
    );
    let completed = 0;
    const off = app.get(RedisLockEvents).on('task.completed', (e) => {
      if (e.queue === q) completed++;
    });
    const before = await commandCalls(probe);
    const worker = queues.process(q, () => undefined, named ? { name: 'welcome' } : {});
    await waitFor('30 completed', () => completed === 30, 10_000);
    const after = await commandCalls(probe);
    off();
    await worker.close();
    const delta: Record<string, number> = {};
    for (const [command, calls] of after) {
      const n = calls - (before.get(command) ?? 0);
      if (n > 0 && !['info', 'blpop', 'subscribe', 'ssubscribe', 'ping'].includes(command)) {
        delta[command] = n;
      }
    }
    return delta;
  }

  it('routing by name adds no Redis command: the same commands as one unnamed handler draining the same tasks', async () => {
    // Loads the scripts first, so that no NOSCRIPT retry is counted.
    await drainCost('warm-up', false);
    const unnamed = await drainCost('cost-unnamed', false);
    const named = await drainCost('cost-named', true);
    // A worker that found nothing left claims once or twice more before it idles, depending on
    // when the wake-up marker is read: those empty claims run only the commands below, and are
    // compared apart from the rest.
    const { evalsha, time, exists, hmget, zrange, zrangebyscore, llen, ...perTask } = named;
    const u = { ...unnamed };
    for (const key of ['evalsha', 'time', 'exists', 'hmget', 'zrange', 'zrangebyscore', 'llen']) {
      delete (u as Record<string, number>)[key];
    }
    // Every command of the 30 leases and acks, to the unit.
    expect(perTask).toEqual(u);
    expect(perTask).toMatchObject({ xadd: 60, zrem: 60 });
    expect(perTask.hincrby).toBeUndefined();
    // One ack-and-claim script per task, the first claim, at most two empty ones, and the
    // workers registry's write at the worker's start (one more if the drain outlasts its 5 s
    // heartbeat).
    for (const calls of [named.evalsha, unnamed.evalsha]) {
      expect(calls).toBeGreaterThanOrEqual(31);
      expect(calls).toBeLessThanOrEqual(35);
    }
    expect([time, exists, hmget, zrange, zrangebyscore, llen].every((c) => c > 0)).toBe(true);
    expect(evalsha).toBe(time);
  });
});
