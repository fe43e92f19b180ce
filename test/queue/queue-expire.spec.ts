import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import type { Subscription } from 'rxjs';
import { QueueError, QueueFullError, QueueService, type QueueEvent } from '../../lib';
import {
  createLockApp,
  deferred,
  redisClient,
  sleep,
  uniquePrefix,
  waitFor,
} from '../support/helpers';

describe('QueueService: expiring tasks (expiresInMs / expiresAt)', () => {
  const prefix = uniquePrefix('queue-expire');
  let app: INestApplicationContext;
  let queues: QueueService;
  let redis: Redis;
  let n = 0;
  const fresh = () => `x${++n}`;

  beforeAll(async () => {
    app = await createLockApp({
      keyPrefix: prefix,
      queue: { backoffMs: 0, keepCompleted: { ageMs: 3_600_000, count: 20_000 } },
    });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  /** Every event of `queue` from now on, collected. */
  const collect = (queue: string) => {
    const seen: QueueEvent[] = [];
    const sub: Subscription = queues.events(queue).subscribe((e) => seen.push(e));
    return { seen, stop: () => sub.unsubscribe() };
  };

  it('10,000 tasks that expire while the queue is paused: 0 handler calls, 10,000 expired events', async () => {
    const q = fresh();
    let calls = 0;
    await queues.pause(q);
    const worker = queues.process(
      q,
      () => {
        calls++;
      },
      { concurrency: 50 },
    );
    const events = collect(q);
    await waitFor('the event reader', async () => (await queues.stats(q)).paused);
    for (let b = 0; b < 10; b++) {
      const ids = Array.from({ length: 1_000 }, (_, i) => `t${b * 1_000 + i}`);
      expect(await queues.enqueue(q, ids, { expiresInMs: 200 })).toBe(1_000);
    }
    // The idle worker comes back at the first deadline and ends them, 1,000 per claim.
    await waitFor('10,000 expired', async () => (await queues.stats(q)).expired === 10_000, 20_000);
    await waitFor(
      '10,000 expired events',
      () => events.seen.filter((e) => e.type === 'expired').length === 10_000,
      10_000,
    );
    await queues.resume(q);
    expect(await queues.stats(q)).toMatchObject({
      ready: 0,
      delayed: 0,
      leased: 0,
      expired: 10_000,
    });
    expect(calls).toBe(0);
    expect(events.seen.filter((e) => e.type === 'active')).toHaveLength(0);
    events.stop();
    await worker.close();
  }, 60_000);

  it('a call kept by keepLastIfActive expires on time once added, while the queue is paused', async () => {
    const q = fresh();
    const ran: string[] = [];
    const holderMayEnd = deferred<void>();
    const worker = queues.process(
      q,
      async (task) => {
        ran.push(task.id);
        if (task.id === 'holder') await holderMayEnd.promise;
      },
      { concurrency: 1 },
    );
    try {
      const deduplication = { id: 'u', keepLastIfActive: true };
      await queues.enqueue(q, 'holder', { deduplication });
      await waitFor('the holder running', () => ran.includes('holder'));
      // Kept (not added) while the holder runs; added when it ends, with its own deadline.
      expect(await queues.enqueue(q, 'kept', { deduplication, expiresInMs: 300 })).toBe(0);
      await queues.pause(q);
      holderMayEnd.resolve();
      await waitFor('the holder completed', async () => (await queues.stats(q)).completed === 1);
      await waitFor(
        'the kept call expired, the queue still paused',
        async () => (await queues.get(q, 'kept'))?.state === 'expired',
        5_000,
      );
      expect((await queues.stats(q)).paused).toBe(true);
      expect(ran).toEqual(['holder']);
    } finally {
      holderMayEnd.resolve();
      await worker.close();
    }
  });

  it('a task whose deadline passes while it waits in the worker (a slot of its name, a batch filling) does not run: it ends expired', async () => {
    const q = fresh();
    const ran: string[] = [];
    const slotFree = deferred<void>();
    const named = queues.process(
      q,
      async (task) => {
        ran.push(task.id);
        if (task.id === 'first') await slotFree.promise;
      },
      { name: 'mail', concurrency: 1 },
    );
    // Another name gives the loop free slots (their sum): it claims 'otp' while 'first' runs.
    const other = queues.process(q, async () => undefined, { name: 'other', concurrency: 2 });
    const b = `${q}-batch`;
    const batch = queues.process(b, (tasks) => void ran.push(...tasks.map((t) => t.id)), {
      batch: { size: 10, maxWaitMs: 1_000 },
    });
    try {
      await queues.enqueue(q, 'first', { name: 'mail' });
      await waitFor('first running', () => ran.includes('first'));
      await queues.enqueue(q, 'otp', { name: 'mail', expiresInMs: 200 });
      await queues.enqueue(b, 'otp-b', { expiresInMs: 200 });
      // Both are claimed at once (leased), and wait here past their deadline.
      await waitFor('both claimed', async () => {
        const [s, sb] = await Promise.all([queues.stats(q), queues.stats(b)]);
        return s.leased === 2 && sb.leased === 1;
      });
      await sleep(300);
      slotFree.resolve();
      await waitFor('both expired', async () => {
        const [t, tb] = await Promise.all([queues.get(q, 'otp'), queues.get(b, 'otp-b')]);
        return t?.state === 'expired' && tb?.state === 'expired';
      });
      expect(ran).toEqual(['first']);
    } finally {
      slotFree.resolve();
      await Promise.all([named.close(), other.close(), batch.close()]);
    }
  });

  it('ends a task not started by its deadline: state expired in get and list, waitFor resolves expired', async () => {
    const q = fresh();
    await queues.enqueue(q, 'late', { payload: { otp: 1 }, expiresAt: Date.now() - 1 });
    await queues.enqueue(q, 'fine', { payload: 2, expiresInMs: 60_000 });
    const outcome = queues.waitFor(q, 'late');
    const ran: string[] = [];
    const worker = queues.process(q, (t) => {
      ran.push(t.id);
    });
    await expect(outcome).resolves.toEqual({
      state: 'expired',
      error: { name: 'TaskExpiredError', message: 'expired before it started' },
    });
    await expect(queues.waitFor(q, 'fine')).resolves.toMatchObject({ state: 'completed' });
    expect(ran).toEqual(['fine']);
    const info = await queues.get(q, 'late');
    expect(info).toMatchObject({ state: 'expired', payload: { otp: 1 }, attempts: 0 });
    expect(info?.finishedAt).toBe(info?.time);
    expect((await queues.list(q, 'expired')).map((t) => t.id)).toEqual(['late']);
    // waitFor of a task that expired already answers from its kept state.
    await expect(queues.waitFor(q, 'late')).resolves.toMatchObject({ state: 'expired' });
    expect(await queues.stats(q)).toMatchObject({ expired: 1, completed: 1 });
    await worker.close();
  });

  it('ends a retry due after the deadline expired instead of running it again', async () => {
    const q = fresh();
    let calls = 0;
    const failed = deferred();
    await queues.enqueue(q, 'r', {
      expiresInMs: 300,
      backoff: { type: 'fixed', delayMs: 600 },
      maxAttempts: 5,
    });
    const outcome = queues.waitFor(q, 'r', { timeoutMs: 10_000 });
    const worker = queues.process(q, () => {
      calls++;
      failed.resolve();
      throw new Error('transient');
    });
    await failed.promise;
    await expect(outcome).resolves.toMatchObject({ state: 'expired' });
    expect(calls).toBe(1);
    expect(await queues.get(q, 'r')).toMatchObject({ state: 'expired', attempts: 1 });
    await worker.close();
  });

  it('ends a task that failed after its deadline expired at once, also when a claim made while it ran dropped its deadline entry', async () => {
    const q = fresh();
    const expiries = `${prefix}queue:{${q}}:expiries`;
    // A first call loads the script (slow on the in-memory backend), not counted in the deadline.
    expect(await queues.claim(q, 1)).toEqual([]);
    await queues.enqueue(q, ['retried', 'released'], { expiresInMs: 300 });
    const leased = new Map((await queues.claim(q, 2)).map((t) => [t.id, t]));
    // Another consumer's claim after the deadline: its sweep finds the tasks waiting nowhere.
    await waitFor('the sweep dropped the entries', async () => {
      expect(await queues.claim(q, 1)).toEqual([]);
      return (await redis.zcard(expiries)) === 0;
    });
    expect(await queues.nack(leased.get('retried')!, { delayMs: 60_000, maxAttempts: 5 })).toBe(
      'retried',
    );
    expect(await queues.get(q, 'retried')).toMatchObject({ state: 'expired', attempts: 1 });
    expect(await queues.release(leased.get('released')!)).toBe(true);
    expect(await queues.get(q, 'released')).toMatchObject({ state: 'expired' });
    expect(await redis.zcard(expiries)).toBe(0);
    await expect(queues.waitFor(q, 'retried', { timeoutMs: 1_000 })).resolves.toMatchObject({
      state: 'expired',
    });
  });

  it('lets a task that started before its deadline finish (and complete) after it', async () => {
    const q = fresh();
    const started = deferred();
    const release = deferred();
    await queues.enqueue(q, 's', { expiresInMs: 2_000 });
    const worker = queues.process(
      q,
      async (t) => {
        if (t.id !== 's') return;
        started.resolve();
        await release.promise;
        return t.options?.expiresAt;
      },
      { concurrency: 2 },
    );
    await started.promise;
    // Past the deadline while it runs: another claim's sweep must not touch it.
    await redis.zadd(`${prefix}queue:{${q}}:expiries`, 1, 's');
    await queues.enqueue(q, 'other');
    await waitFor('the other task', async () => (await queues.stats(q)).completed === 1);
    release.resolve();
    const outcome = await queues.waitFor(q, 's');
    expect(outcome.state).toBe('completed');
    expect(typeof (outcome as { result: unknown }).result).toBe('number');
    expect(await queues.stats(q)).toMatchObject({ expired: 0, completed: 2 });
    await worker.close();
  });

  it('expires grouped, prioritized and delayed tasks from where they wait; an expired id can be enqueued again', async () => {
    const q = fresh();
    await queues.pause(q);
    const past = Date.now() - 1;
    await queues.enqueue(q, 'g', { group: 'a', expiresAt: past });
    await queues.enqueue(q, 'p', { priority: 3, expiresAt: new Date(past) });
    await queues.enqueue(q, 'd', { delayMs: 60_000, expiresAt: past });
    await queues.enqueue(q, 'keep', { group: 'a' });
    const worker = queues.process(q, () => undefined);
    await waitFor('3 expired', async () => (await queues.stats(q)).expired === 3);
    expect(await queues.stats(q)).toMatchObject({ ready: 1, delayed: 0, expired: 3 });
    expect(await queues.enqueue(q, 'g', { group: 'a' })).toBe(1);
    expect(await queues.get(q, 'g')).toMatchObject({ state: 'ready', attempts: 0 });
    await queues.resume(q);
    await expect(queues.waitFor(q, 'g')).resolves.toMatchObject({ state: 'completed' });
    await expect(queues.waitFor(q, 'keep')).resolves.toMatchObject({ state: 'completed' });
    await worker.close();
  });

  it('frees the slots of a bounded queue once its worker ends the expired tasks', async () => {
    const q = fresh();
    await queues.setMaxSize(q, 2);
    await queues.pause(q);
    const worker = queues.process(q, () => undefined);
    await queues.enqueue(q, ['a', 'b'], { expiresInMs: 100 });
    await expect(queues.enqueue(q, 'c')).rejects.toBeInstanceOf(QueueFullError);
    await waitFor('2 expired', async () => (await queues.stats(q)).expired === 2);
    expect(await queues.enqueue(q, ['c', 'd'])).toBe(2);
    await worker.close();
  });

  it('an expired flow child fails its parent (onChildFailure fail-parent)', async () => {
    const q = fresh();
    const kids = fresh();
    await queues.pause(kids);
    const worker = queues.process(kids, () => undefined);
    await queues.enqueueFlow({
      queue: q,
      id: 'parent',
      children: [{ queue: kids, id: 'kid', options: { expiresInMs: 50 } }],
    });
    await expect(queues.waitFor(q, 'parent')).resolves.toMatchObject({
      state: 'dead',
      error: { name: 'FlowChildFailedError' },
    });
    expect(await queues.get(kids, 'kid')).toMatchObject({ state: 'expired' });
    await worker.close();
  });

  it("a flow parent's deadline counts once its children finished: it expires on time on a paused queue", async () => {
    const q = fresh();
    const kids = fresh();
    await queues.pause(q);
    const parents = queues.process(q, () => undefined);
    const children = queues.process(kids, () => undefined);
    await queues.enqueueFlow({
      queue: q,
      id: 'parent',
      options: { expiresInMs: 300 },
      children: [{ queue: kids, id: 'kid' }],
    });
    await expect(queues.waitFor(kids, 'kid')).resolves.toMatchObject({ state: 'completed' });
    await waitFor(
      'the ready parent expired, the queue still paused',
      async () => (await queues.get(q, 'parent'))?.state === 'expired',
      5_000,
    );
    expect(await queues.stats(q)).toMatchObject({ paused: true, ready: 0, expired: 1 });
    expect(await redis.zcard(`${prefix}queue:{${q}}:expiries`)).toBe(0);
    await parents.close();
    await children.close();
  });

  it('cancel, remove and clean know expired tasks', async () => {
    const q = fresh();
    const worker = queues.process(q, () => undefined);
    await queues.enqueue(q, ['e1', 'e2'], { expiresAt: 1 });
    await waitFor('2 expired', async () => (await queues.stats(q)).expired === 2);
    expect(await queues.cancel(q, 'e1')).toBe('finished');
    expect(await queues.remove(q, 'e1')).toBe(true);
    expect(await queues.clean(q, 'expired', { olderThanMs: 0 })).toBe(1);
    expect(await queues.stats(q)).toMatchObject({ expired: 0 });
    await worker.close();
  });

  it('refuses a bad deadline, naming the option', async () => {
    const q = fresh();
    const refused = (options: object) =>
      queues.enqueue(q, 'bad', options as never).catch((e: unknown) => e);
    for (const [options, name] of [
      [{ expiresInMs: 0 }, 'expiresInMs'],
      [{ expiresInMs: 1.5 }, 'expiresInMs'],
      [{ expiresAt: 'tomorrow' }, 'expiresAt'],
      [{ expiresAt: new Date(NaN) }, 'expiresAt'],
      [{ expiresAt: 1, expiresInMs: 1 }, 'expiresAt'],
    ] as const) {
      const err = (await refused(options)) as QueueError;
      expect(err).toBeInstanceOf(QueueError);
      expect(err.message).toContain(`'${name}'`);
    }
    expect(await queues.stats(q)).toMatchObject({ ready: 0 });
  });
});
