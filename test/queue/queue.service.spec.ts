import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { MAX_QUEUE_BATCH, QueueError, QueueService, type LeasedTask } from '../../lib';
import {
  createLockApp,
  redisClient,
  redisTimeMs,
  uniquePrefix,
  waitFor,
  queueStats,
} from '../support/helpers';

describe('QueueService', () => {
  const prefix = uniquePrefix('queue-service');
  let app: INestApplicationContext;
  let queues: QueueService;
  let redis: Redis;
  let n = 0;
  /** A queue name no other test uses. */
  const fresh = () => `q${++n}`;
  const key = (queue: string, part: string) => `${prefix}queue:{${queue}}:${part}`;
  const redisNow = () => redisTimeMs(redis);
  /** Every key of the queue that still exists. */
  /** Keys a queue left behind, but for the bounded ones it keeps (wake-up, events, fence). */
  const leftovers = async (queue: string) =>
    (await redis.keys(`${prefix}queue:{${queue}}:*`))
      .filter((k) => !/:(wake|events|fence|ties)$/.test(k))
      .sort();
  /** Waits until Redis time is past the lease expiry of `task`. */
  const leaseExpired = (task: LeasedTask) =>
    waitFor(`lease of ${task.id} to expire`, async () => (await redisNow()) > task.leaseExpiresAt);

  beforeAll(async () => {
    // Completed tasks are not kept here: these tests check that an ack leaves nothing behind.
    app = await createLockApp({
      keyPrefix: prefix,
      queue: { maxAttempts: 3, keepCompleted: { ageMs: 0, count: 0 } },
    });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  describe('enqueue', () => {
    it('adds ids due at Redis TIME + delayMs and returns how many were new', async () => {
      const q = fresh();
      const before = await redisNow();
      expect(await queues.enqueue(q, 'a')).toBe(1);
      expect(await queues.enqueue(q, ['b', 'c'], { delayMs: 60_000 })).toBe(2);
      const after = await redisNow();
      const a = Number(await redis.zscore(key(q, 'due'), 'a'));
      const b = Number(await redis.zscore(key(q, 'due'), 'b'));
      expect(a).toBeGreaterThanOrEqual(before);
      expect(a).toBeLessThanOrEqual(after);
      expect(b).toBeGreaterThanOrEqual(before + 60_000);
      expect(b).toBeLessThanOrEqual(after + 60_000);
      expect(await queues.stats(q)).toMatchObject(queueStats({ ready: 1, delayed: 2 }));
    });

    it('does not add an id twice: ready, delayed, leased or repeated in one call', async () => {
      const q = fresh();
      expect(await queues.enqueue(q, ['x', 'x', 'y', 'x'])).toBe(2);
      expect(await queues.enqueue(q, 'later', { delayMs: 60_000 })).toBe(1);
      expect(await queues.enqueue(q, ['x', 'y', 'later'])).toBe(0);
      const [leased] = await queues.claim(q, 1);
      expect(await queues.enqueue(q, leased.id)).toBe(0);
      expect(await queues.stats(q)).toMatchObject(queueStats({ ready: 1, delayed: 1, leased: 1 }));
    });

    it('keeps the first due time and payload by default; replace updates both (not for leased ids)', async () => {
      const q = fresh();
      await queues.enqueue(q, 'k', { delayMs: 60_000, payload: { v: 1 } });
      const score = Number(await redis.zscore(key(q, 'due'), 'k'));
      expect(await queues.enqueue(q, 'k', { payload: { v: 2 } })).toBe(0);
      expect(Number(await redis.zscore(key(q, 'due'), 'k'))).toBe(score);
      expect(await redis.hget(key(q, 'payload'), 'k')).toBe('{"v":1}');

      expect(await queues.enqueue(q, 'k', { replace: true, payload: { v: 3 } })).toBe(0);
      const [task] = await queues.top(q);
      expect(task.id).toBe('k');
      expect(task.score).toBeLessThan(score);
      expect(task.payload).toEqual({ v: 3 });
      // Without a payload, replace moves the due time and keeps the payload.
      await queues.enqueue(q, 'k', { replace: true, delayMs: 60_000 });
      expect(await queues.top(q)).toEqual([]);
      expect(await redis.hget(key(q, 'payload'), 'k')).toBe('{"v":3}');

      await queues.enqueue(q, 'k', { replace: true });
      const [leased] = await queues.claim(q);
      await queues.enqueue(q, 'k', { replace: true, delayMs: 60_000, payload: 'new' });
      expect(Number(await redis.zscore(key(q, 'leased'), 'k'))).toBe(leased.leaseExpiresAt);
      expect(await redis.zscore(key(q, 'due'), 'k')).toBeNull();
      expect(await redis.hget(key(q, 'payload'), 'k')).toBe('{"v":3}');
    });

    it("replace without a priority or group keeps the task's own (promoting a delayed task keeps its priority)", async () => {
      const q = fresh();
      await queues.enqueue(q, 'p2', { priority: 2, delayMs: 60_000 });
      await queues.enqueue(q, 'p1', { priority: 1, delayMs: 60_000 });
      await queues.enqueue(q, 'g', { group: 'ann', delayMs: 60_000 });
      expect(await queues.enqueue(q, ['p2', 'p1', 'g'], { replace: true })).toBe(0);
      expect((await queues.get(q, 'p2'))?.priority).toBe(2);
      expect((await queues.get(q, 'p1'))?.priority).toBe(1);
      expect((await queues.get(q, 'g'))?.group).toBe('ann');
      // Priorities still decide the order once due: p1 before p2.
      const claimed = await queues.claim(q, 3);
      expect(claimed.map((t) => t.id).filter((id) => id !== 'g')).toEqual(['p1', 'p2']);
      // A call that names a priority sets it.
      await queues.enqueue(q, 'p3', { priority: 3, delayMs: 60_000 });
      await queues.enqueue(q, 'p3', { replace: true, priority: -5 });
      expect((await queues.get(q, 'p3'))?.priority).toBe(-5);
    });

    it("replace with some of a task's own options keeps the others: its name, deadline and failure policy", async () => {
      const q = fresh();
      // 16 digits: more than cjson.encode writes, so the merge must keep it exactly.
      const far = Number.MAX_SAFE_INTEGER;
      const backoff = { type: 'fixed', delayMs: 5 } as const;
      await queues.enqueue(q, 'a', {
        name: 'welcome',
        delayMs: 60_000,
        maxAttempts: 1,
        backoff,
        timeoutMs: 500,
        expiresAt: far,
      });
      await queues.enqueue(q, 'a', { replace: true, timeoutMs: 700 });
      const lastEvent = async () =>
        (await redis.xrevrange(key(q, 'events'), '+', '-', 'COUNT', 1))[0][1];
      expect(await lastEvent()).toEqual(['t', 'enqueued', 'i', 'a', 'n', 'welcome']);
      expect(Number(await redis.zscore(key(q, 'expiries'), 'a'))).toBe(far);
      const [task] = await queues.claim(q);
      expect(task).toMatchObject({
        id: 'a',
        name: 'welcome',
        options: { maxAttempts: 1, backoff, timeoutMs: 700, expiresAt: far },
      });
      // A name given keeps the deadline: past it, the task ends expired instead of running.
      await queues.enqueue(q, 'b', { delayMs: 60_000, expiresAt: 1 });
      await queues.enqueue(q, 'b', { replace: true, name: 'welcome' });
      expect(await lastEvent()).toEqual(['t', 'enqueued', 'i', 'b', 'n', 'welcome']);
      expect(await queues.claim(q)).toEqual([]);
      expect(await lastEvent()).toEqual(['t', 'expired', 'i', 'b']);
    });

    it('replace leaves a flow parent waiting for its children as it is: it is not claimed before them', async () => {
      const q = fresh();
      const child = fresh();
      await queues.enqueueFlow({ queue: q, id: 'parent', children: [{ queue: child, id: 'c' }] });
      expect(await queues.enqueue(q, 'parent', { replace: true, payload: 'new' })).toBe(0);
      expect(await queues.get(q, 'parent')).toMatchObject({ state: 'waiting-children' });
      expect(await queues.stats(q)).toMatchObject({ ready: 0, waitingChildren: 1 });
      expect(await queues.claim(q)).toEqual([]);
    });

    it('stores any JSON payload per id (the same for every id of an array) and returns it', async () => {
      const q = fresh();
      const payload = { n: 1.5, s: 'ü', list: [null, true, { deep: [1] }], when: new Date(0) };
      await queues.enqueue(q, [1, 2], { payload });
      await queues.enqueue(q, 3, { payload: 'just a string' });
      await queues.enqueue(q, 4);
      const tasks = await queues.pop(q, 10);
      expect(tasks.map((t) => t.id).sort()).toEqual(['1', '2', '3', '4']);
      const byId = new Map(tasks.map((t) => [t.id, t]));
      const roundTripped = JSON.parse(JSON.stringify(payload));
      expect(byId.get('1')!.payload).toEqual(roundTripped);
      expect(byId.get('2')!.payload).toEqual(roundTripped);
      expect(byId.get('3')!.payload).toBe('just a string');
      expect(byId.get('4')!.payload).toBeUndefined();
    });

    it('leaves an id queued with a priority or a group where it is when enqueued again without', async () => {
      const q = fresh();
      await queues.enqueue(q, 'p', { priority: 5, payload: 'p' });
      await queues.enqueue(q, 'g', { group: 'a', payload: 'g' });
      await queues.enqueue(q, 'later', { priority: -5, delayMs: 60_000 });
      const info = await redis.hgetall(key(q, 'info'));
      expect(await queues.enqueue(q, ['p', 'g', 'later'], { payload: 'plain' })).toBe(0);
      expect(await redis.hgetall(key(q, 'info'))).toEqual(info);
      expect(await redis.zcard(key(q, 'due'))).toBe(0);
      expect(await redis.hget(key(q, 'payload'), 'p')).toBe('"p"');
      expect(await queues.stats(q)).toMatchObject(queueStats({ ready: 2, delayed: 1 }));
    });

    it('sorts out, in one call of several ids, new, queued, leased, dead and cancelled ids and repeats', async () => {
      const q = fresh();
      await queues.enqueue(q, ['leased', 'dead', 'cancelled', 'queued'], { payload: 'old' });
      const [leased, dead] = await queues.claim(q, 2);
      expect([leased.id, dead.id]).toEqual(['leased', 'dead']);
      expect(await queues.nack(dead, { maxAttempts: 1 })).toBe('dead');
      expect(await queues.cancel(q, 'cancelled')).toBe('cancelled');
      const ids = ['new', 'queued', 'dead', 'leased', 'cancelled', 'new', 'dead', 'other'];
      // new, dead (as a new task), cancelled (as a new task), other: 4.
      expect(await queues.enqueue(q, ids, { payload: 'again' })).toBe(4);
      expect(await queues.stats(q)).toMatchObject(queueStats({ ready: 5, leased: 1, dead: 0 }));
      const claimed = await queues.claim(q, 10);
      expect(claimed.map((t) => [t.id, t.payload, t.attempt])).toEqual([
        ['queued', 'old', 1],
        ['new', 'again', 1],
        ['dead', 'again', 1],
        ['cancelled', 'again', 1],
        ['other', 'again', 1],
      ]);
    });

    it('adds a dead id again as a new task (attempts reset)', async () => {
      const q = fresh();
      await queues.enqueue(q, 'd');
      const [task] = await queues.claim(q);
      expect(await queues.nack(task, { maxAttempts: 1 })).toBe('dead');
      expect(await queues.enqueue(q, 'd', { payload: 2 })).toBe(1);
      expect(await queues.stats(q)).toMatchObject(queueStats({ ready: 1 }));
      const [again] = await queues.claim(q);
      expect(again.attempt).toBe(1);
      expect(again.payload).toBe(2);
    });
  });

  describe('pop / top / dequeue', () => {
    it('pop takes due tasks, lowest due time first, and removes them with their payload', async () => {
      const q = fresh();
      // Delays far beyond a stalled round trip: 'mid' and 'late' are surely not due at the first top.
      await queues.enqueue(q, 'late', { delayMs: 2_000 });
      await queues.enqueue(q, 'first', { payload: 1 });
      await queues.enqueue(q, 'mid', { delayMs: 1_000 });
      await queues.enqueue(q, 'never', { delayMs: 60_000 });
      expect((await queues.top(q, 10)).map((t) => t.id)).toEqual(['first']);
      await waitFor('three due', async () => (await queues.stats(q)).ready === 3);
      expect((await queues.top(q, 10)).map((t) => t.id)).toEqual(['first', 'mid', 'late']);
      const popped = await queues.pop(q, 2);
      expect(popped.map((t) => t.id)).toEqual(['first', 'mid']);
      expect(popped[0]).toMatchObject({ queue: q, payload: 1 });
      expect(popped[0].score).toBeLessThan(popped[1].score);
      expect(await redis.hexists(key(q, 'payload'), 'first')).toBe(0);
      expect((await queues.pop(q, 10)).map((t) => t.id)).toEqual(['late']);
      expect(await queues.pop(q, 10)).toEqual([]);
      expect(await queues.stats(q)).toMatchObject(queueStats({ delayed: 1 }));
    });

    it('pop delivers each task at most once across concurrent callers', async () => {
      const q = fresh();
      const ids = Array.from({ length: 500 }, (_, i) => `t${i}`);
      await queues.enqueue(q, ids);
      const batches = await Promise.all(Array.from({ length: 20 }, () => queues.pop(q, 40)));
      const got = batches.flat().map((t) => t.id);
      expect(got).toHaveLength(500);
      expect(new Set(got).size).toBe(500);
    });

    it('top defaults to one task and leaves it in place', async () => {
      const q = fresh();
      await queues.enqueue(q, ['a', 'b']);
      const [a] = await queues.top(q);
      expect(await queues.top(q)).toEqual([a]);
      expect((await queues.stats(q)).ready).toBe(2);
    });

    it('dequeue removes only when the stored score still equals the given one', async () => {
      const q = fresh();
      await queues.enqueue(q, 'c', { payload: 'p' });
      const [seen] = await queues.top(q);
      await queues.enqueue(q, 'c', { replace: true, delayMs: 1 });
      expect(await queues.dequeue(q, 'c', seen.score)).toBe(false);
      expect(await redis.zscore(key(q, 'due'), 'c')).not.toBeNull();
      const current = Number(await redis.zscore(key(q, 'due'), 'c'));
      expect(await queues.dequeue(q, 'c', current)).toBe(true);
      expect(await queues.dequeue(q, 'c', current)).toBe(false);
      expect(await queues.dequeue(q, 'missing', current)).toBe(false);
      expect(await leftovers(q)).toEqual([]);
    });

    it('dequeue does not remove a leased task', async () => {
      const q = fresh();
      await queues.enqueue(q, 7);
      const [task] = await queues.claim(q);
      expect(await queues.dequeue(q, 7, task.score)).toBe(false);
      expect((await queues.stats(q)).leased).toBe(1);
    });
  });

  describe('claim / ack / nack / extendLease / release', () => {
    it('claim leases due tasks with a fresh token and attempt 1; ack removes everything', async () => {
      const q = fresh();
      await queues.enqueue(q, ['a', 'b', 'c'], { payload: { x: 1 } });
      await queues.enqueue(q, 'later', { delayMs: 60_000 });
      const before = await redisNow();
      const tasks = await queues.claim(q, 5, { leaseMs: 10_000 });
      expect(tasks.map((t) => t.id)).toEqual(['a', 'b', 'c']);
      expect(new Set(tasks.map((t) => t.leaseToken)).size).toBe(3);
      for (const t of tasks) {
        expect(t).toMatchObject({ queue: q, attempt: 1, payload: { x: 1 } });
        expect(t.leaseExpiresAt).toBeGreaterThanOrEqual(before + 10_000);
        expect(Number(await redis.zscore(key(q, 'leased'), t.id))).toBe(t.leaseExpiresAt);
      }
      expect(await queues.stats(q)).toMatchObject(queueStats({ delayed: 1, leased: 3 }));
      expect(await queues.claim(q)).toEqual([]);
      for (const t of tasks) expect(await queues.ack(t)).toBe(true);
      expect(await queues.ack(tasks[0])).toBe(false);
      expect(await queues.stats(q)).toMatchObject(queueStats({ delayed: 1 }));
      expect(await redis.hlen(key(q, 'payload'))).toBe(0);
      expect(await redis.exists(key(q, 'attempts'), key(q, 'tokens'))).toBe(0);
    });

    it('concurrent claims never lease the same task twice', async () => {
      const q = fresh();
      await queues.enqueue(
        q,
        Array.from({ length: 300 }, (_, i) => i),
      );
      const batches = await Promise.all(Array.from({ length: 12 }, () => queues.claim(q, 30)));
      const ids = batches.flat().map((t) => t.id);
      expect(ids).toHaveLength(300);
      expect(new Set(ids).size).toBe(300);
    });

    it('an expired lease returns the task at the next claim, with attempt + 1 and a new token', async () => {
      const q = fresh();
      await queues.enqueue(q, 'e', { payload: 'kept' });
      const [first] = await queues.claim(q, 1, { leaseMs: 50 });
      await leaseExpired(first);
      const [second] = await queues.claim(q, 1, { leaseMs: 10_000 });
      expect(second).toMatchObject({ id: 'e', attempt: 2, payload: 'kept' });
      expect(second.leaseToken).not.toBe(first.leaseToken);
    });

    it('a stale ack after lease expiry returns false and does not remove the re-claimed task', async () => {
      const q = fresh();
      await queues.enqueue(q, 's');
      const [stale] = await queues.claim(q, 1, { leaseMs: 50 });
      await leaseExpired(stale);
      const [current] = await queues.claim(q, 1, { leaseMs: 10_000 });
      expect(await queues.ack(stale)).toBe(false);
      expect(await queues.nack(stale)).toBe(false);
      expect(await queues.extendLease(stale, 60_000)).toBe(false);
      expect(await queues.release(stale)).toBe(false);
      expect(Number(await redis.zscore(key(q, 'leased'), 's'))).toBe(current.leaseExpiresAt);
      expect(await queues.stats(q)).toMatchObject(queueStats({ leased: 1 }));
      expect(await queues.ack(current)).toBe(true);
      expect(await leftovers(q)).toEqual([]);
    });

    it('keeps the lease tokens of a few leases in a hashtable, not a listpack searched end to end', async () => {
      const q = fresh();
      await queues.enqueue(q, ['a', 'b']);
      await queues.claim(q, 2);
      expect(await redis.call('OBJECT', 'ENCODING', key(q, 'tokens'))).toBe('hashtable');
    });

    it('deletes the lease tokens (and the field that keeps them a hashtable) with the last lease', async () => {
      const q = fresh();
      const tokens = key(q, 'tokens');
      await queues.enqueue(q, ['a', 'b', 'c']);
      const [a, b] = await queues.claim(q, 2);
      expect((await redis.hkeys(tokens)).sort()).toEqual(['', 'a', 'b']);
      const [c] = await queues.claim(q, 1);
      expect(await queues.ack(a)).toBe(true);
      expect((await redis.hkeys(tokens)).sort()).toEqual(['', 'b', 'c']);
      expect(await queues.ack(b)).toBe(true);
      expect(await redis.exists(tokens)).toBe(1);
      expect(await queues.ack(c)).toBe(true);
      expect(await redis.exists(tokens)).toBe(0);
      expect(await leftovers(q)).toEqual([]);
    });

    it('an expired but not yet reclaimed lease can still be acked', async () => {
      const q = fresh();
      await queues.enqueue(q, 'slow');
      const [task] = await queues.claim(q, 1, { leaseMs: 30 });
      await leaseExpired(task);
      expect(await queues.ack(task)).toBe(true);
      expect(await queues.claim(q)).toEqual([]);
    });

    it('an expired lease that used maxAttempts goes to dead letter at the next claim', async () => {
      const q = fresh();
      await queues.enqueue(q, 'crashy', { payload: { why: 'test' } });
      let task!: LeasedTask;
      for (let attempt = 1; attempt <= 2; attempt++) {
        [task] = await queues.claim(q, 1, { leaseMs: 30, maxAttempts: 2 });
        expect(task.attempt).toBe(attempt);
        await leaseExpired(task);
      }
      expect(await queues.claim(q, 1, { maxAttempts: 2 })).toEqual([]);
      expect(await queues.stats(q)).toMatchObject(queueStats({ dead: 1 }));
      const [dead] = await queues.deadLetters(q);
      expect(dead).toMatchObject({ queue: q, id: 'crashy', attempts: 2, payload: { why: 'test' } });
    });

    it('nack returns the task after delayMs keeping attempts and payload, then dead-letters at maxAttempts', async () => {
      const q = fresh();
      await queues.enqueue(q, 'n', { payload: [1, 2] });
      const [first] = await queues.claim(q);
      const before = await redisNow();
      expect(await queues.nack(first, { delayMs: 60_000 })).toBe('retried');
      expect(Number(await redis.zscore(key(q, 'due'), 'n'))).toBeGreaterThanOrEqual(
        before + 60_000,
      );
      expect(await queues.stats(q)).toMatchObject(queueStats({ delayed: 1 }));
      await queues.enqueue(q, 'n', { replace: true });
      const [second] = await queues.claim(q);
      expect(second).toMatchObject({ attempt: 2, payload: [1, 2] });
      expect(await queues.nack(second)).toBe('retried');
      const [third] = await queues.claim(q);
      expect(third.attempt).toBe(3);
      // The module's maxAttempts is 3.
      expect(await queues.nack(third)).toBe('dead');
      expect(await queues.stats(q)).toMatchObject(queueStats({ dead: 1 }));
    });

    it('extendLease moves the expiry for the current holder only', async () => {
      const q = fresh();
      await queues.enqueue(q, 'x');
      const [task] = await queues.claim(q, 1, { leaseMs: 1_000 });
      const before = await redisNow();
      expect(await queues.extendLease(task, 60_000)).toBe(true);
      expect(Number(await redis.zscore(key(q, 'leased'), 'x'))).toBeGreaterThanOrEqual(
        before + 60_000,
      );
      expect(await queues.extendLease({ ...task, leaseToken: 'forged' }, 60_000)).toBe(false);
    });

    it('release gives the task back ready at once without counting the attempt', async () => {
      const q = fresh();
      await queues.enqueue(q, 'r');
      const [first] = await queues.claim(q);
      expect(await queues.release(first)).toBe(true);
      expect(await redis.hexists(key(q, 'attempts'), 'r')).toBe(0);
      const [again] = await queues.claim(q);
      expect(again.attempt).toBe(1);
      expect(await queues.nack(again)).toBe('retried');
      const [third] = await queues.claim(q);
      expect(await queues.release(third)).toBe(true);
      expect(await redis.hget(key(q, 'attempts'), 'r')).toBe('1');
    });
  });

  describe('dead letters', () => {
    it('deadLetters lists the oldest first; requeueDead moves given ids or the oldest back with attempts reset', async () => {
      const q = fresh();
      for (const id of ['d1', 'd2', 'd3']) {
        await queues.enqueue(q, id, { payload: id });
        const [task] = await queues.claim(q);
        await queues.nack(task, { maxAttempts: 1 });
      }
      const dead = await queues.deadLetters(q);
      expect(dead.map((d) => d.id)).toEqual(['d1', 'd2', 'd3']);
      expect(dead[0]).toMatchObject({ attempts: 1, payload: 'd1' });
      expect(dead[0].diedAt).toBeLessThanOrEqual(dead[2].diedAt);
      expect((await queues.deadLetters(q, 2)).map((d) => d.id)).toEqual(['d1', 'd2']);

      expect(await queues.requeueDead(q, ['d2', 'not-dead'])).toBe(1);
      expect(await queues.stats(q)).toMatchObject(queueStats({ ready: 1, dead: 2 }));
      const [d2] = await queues.claim(q);
      expect(d2).toMatchObject({ id: 'd2', attempt: 1, payload: 'd2' });
      await queues.ack(d2);

      expect(await queues.requeueDead(q)).toBe(2);
      expect(await queues.requeueDead(q)).toBe(0);
      expect((await queues.claim(q, 10)).map((t) => [t.id, t.attempt])).toEqual([
        ['d1', 1],
        ['d3', 1],
      ]);
    });
  });

  describe('FIFO', () => {
    it('claims tasks enqueued in the same millisecond in enqueue order, not id order', async () => {
      const q = fresh();
      // One call: the same Redis ms for every id. Then calls sent together, mostly in one ms.
      await queues.enqueue(q, [8, 9, 10, 100, 11]);
      await Promise.all(['b', 'a', '20', '3'].map((id) => queues.enqueue(q, id)));
      const claimed = (await queues.claim(q, 10)).map((t) => t.id);
      expect(claimed).toEqual(['8', '9', '10', '100', '11', 'b', 'a', '20', '3']);
      // What get() reports as the due time is a whole ms, never later than the enqueue's own.
      const [one] = await queues.list(fresh(), 'ready');
      expect(one).toBeUndefined();
    });

    it('keeps enqueue order for a batch of 1,000 ids in one call', async () => {
      const q = fresh();
      const ids = Array.from({ length: 1_000 }, (_, i) => String(999 - i));
      await queues.enqueue(q, ids);
      expect((await queues.claim(q, 1_000)).map((t) => t.id)).toEqual(ids);
    });

    it('reports a whole-ms due time and keeps dequeue compare-and-remove working', async () => {
      const q = fresh();
      await queues.enqueue(q, ['x', 'y']);
      const [info] = await queues.list(q, 'ready');
      expect(Number.isInteger(info.time)).toBe(true);
      const [task] = await queues.top(q);
      expect(await queues.dequeue(q, task.id, task.score)).toBe(true);
      expect((await queues.top(q)).map((t) => t.id)).toEqual(['y']);
    });
  });

  describe('keys', () => {
    it('keeps every key of a queue under one hash tag: {name}, or the tag the name already has (then ending in {})', async () => {
      await queues.enqueue('plain', 'a', { payload: 1 });
      await queues.claim('plain');
      await queues.enqueue('plain', 'b', { payload: 1 });
      await queues.enqueue('orders:{eu}', 'c');
      const keys = (await redis.keys(`${prefix}queue:*`)).filter(
        (k) => k.includes('plain') || k.includes('{eu}'),
      );
      expect(keys.sort()).toEqual(
        [
          `${prefix}queue:{plain}:attempts`,
          `${prefix}queue:{plain}:due`,
          `${prefix}queue:{plain}:events`,
          `${prefix}queue:{plain}:fence`,
          `${prefix}queue:{plain}:info`,
          `${prefix}queue:{plain}:leased`,
          `${prefix}queue:{plain}:payload`,
          `${prefix}queue:{plain}:ties`,
          `${prefix}queue:{plain}:tokens`,
          `${prefix}queue:{plain}:wake`,
          `${prefix}queue:orders:{eu}{}:due`,
          `${prefix}queue:orders:{eu}{}:events`,
          `${prefix}queue:orders:{eu}{}:info`,
          `${prefix}queue:orders:{eu}{}:ties`,
          `${prefix}queue:orders:{eu}{}:wake`,
        ].sort(),
      );
    });
  });

  describe('bad arguments', () => {
    const q = 'bad-args';
    const expectQueueError = async (call: () => Promise<unknown>, argument: string) => {
      const err = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(QueueError);
      expect((err as QueueError).argument).toBe(argument);
      expect((err as QueueError).message).toContain(`'${argument}'`);
    };

    it.each([
      ['empty queue name', () => queues.enqueue('', 'a'), 'queue'],
      ['queue name over 512 bytes', () => queues.pop('é'.repeat(257)), 'queue'],
      ['queue name not a string', () => queues.top(42 as never), 'queue'],
      ['empty id', () => queues.enqueue(q, ''), 'id'],
      ['NaN id', () => queues.enqueue(q, NaN), 'id'],
      ['object id in an array', () => queues.enqueue(q, ['a', {} as never]), 'ids'],
      ['empty id array', () => queues.enqueue(q, []), 'ids'],
      [
        'more ids than the cap',
        () =>
          queues.enqueue(
            q,
            Array.from({ length: MAX_QUEUE_BATCH + 1 }, (_, i) => i),
          ),
        'ids',
      ],
      ['negative delay', () => queues.enqueue(q, 'a', { delayMs: -1 }), 'delayMs'],
      ['fractional delay', () => queues.enqueue(q, 'a', { delayMs: 1.5 }), 'delayMs'],
      ['function payload', () => queues.enqueue(q, 'a', { payload: () => 1 }), 'payload'],
      [
        'nested symbol payload',
        () => queues.enqueue(q, 'a', { payload: { s: Symbol() } }),
        'payload',
      ],
      ['BigInt payload', () => queues.enqueue(q, 'a', { payload: { n: BigInt(1) } }), 'payload'],
      ['NaN payload', () => queues.enqueue(q, 'a', { payload: [NaN] }), 'payload'],
      ['non-boolean replace', () => queues.enqueue(q, 'a', { replace: 'yes' as never }), 'replace'],
      ['unknown option', () => queues.enqueue(q, 'a', { delay: 5 } as never), 'delay'],
      ['count 0', () => queues.pop(q, 0), 'count'],
      ['fractional count', () => queues.top(q, 1.5), 'count'],
      ['count over the cap', () => queues.claim(q, MAX_QUEUE_BATCH + 1), 'count'],
      ['leaseMs 0', () => queues.claim(q, 1, { leaseMs: 0 }), 'leaseMs'],
      ['maxAttempts 0', () => queues.claim(q, 1, { maxAttempts: 0 }), 'maxAttempts'],
      ['non-numeric score', () => queues.dequeue(q, 'a', '1' as never), 'score'],
      ['not a task', () => queues.ack({ id: 'a' } as never), 'task'],
      [
        'task of a bad queue',
        () => queues.nack({ queue: '', id: 'a', leaseToken: 't' } as never),
        'task',
      ],
      [
        'negative extension',
        () => queues.extendLease({ queue: q, id: 'a', leaseToken: 't' } as never, -5),
        'ms',
      ],
      ['dead letter count 0', () => queues.deadLetters(q, 0), 'count'],
    ])('rejects %s with a QueueError naming the argument', async (_what, call, argument) => {
      await expectQueueError(call, argument);
    });

    it('a rejected call changes nothing in Redis', async () => {
      await expect(queues.enqueue(q, ['ok', ''])).rejects.toThrow(QueueError);
      await expect(queues.enqueue(q, 'ok', { payload: { f: () => 1 } })).rejects.toThrow(
        QueueError,
      );
      expect(await redis.keys(`${prefix}queue:{${q}}*`)).toEqual([]);
    });

    it('property: enqueue rejects every non-JSON payload and every bad id before touching Redis', async () => {
      const badPayload = fc.oneof(
        fc.func(fc.anything()),
        fc.constant(Symbol('s')),
        fc.bigInt().map((b) => ({ b })),
        fc.constantFrom(NaN, Infinity, -Infinity).map((x) => [x]),
        fc.constant(null).map(() => {
          const cyclic: Record<string, unknown> = {};
          cyclic.self = cyclic;
          return cyclic;
        }),
      );
      const badId = fc.oneof(
        fc.constant(''),
        fc.constantFrom(NaN, Infinity, -Infinity),
        fc.boolean(),
        fc.constant(null),
        fc.object(),
      );
      await fc.assert(
        fc.asyncProperty(badPayload, async (payload) => {
          await expectQueueError(() => queues.enqueue(q, 'p', { payload }), 'payload');
        }),
        { numRuns: 50 },
      );
      await fc.assert(
        fc.asyncProperty(badId, async (id) => {
          await expectQueueError(() => queues.enqueue(q, id as never), 'id');
          await expectQueueError(() => queues.enqueue(q, ['fine', id as never]), 'ids');
        }),
        { numRuns: 50 },
      );
      expect(await redis.keys(`${prefix}queue:{${q}}*`)).toEqual([]);
    });

    it('property: any JSON value round-trips as a payload', async () => {
      const queue = fresh();
      await fc.assert(
        fc.asyncProperty(fc.jsonValue(), async (payload) => {
          await queues.enqueue(queue, 'j', { payload, replace: true });
          const [task] = await queues.top(queue);
          expect(task.payload).toEqual(JSON.parse(JSON.stringify(payload)));
        }),
        { numRuns: 100 },
      );
    });
  });
});
