import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { QueueService } from '../../lib';
import { exited, lineFrom } from '../support/child';
import {
  createLockApp,
  queueAppAndClient,
  queueStats,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';
import { spawnQueueWorker, waitQueueDrained, type QueueWorkerChild } from '../support/queue-crash';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/** A task of the test: its id, name, and the number in its payload. */
interface Named {
  id: string;
  name: string;
  n: number;
}

/** `count` tasks `<tag><i>`, named by `nameOf(i)`. */
const tasks = (tag: string, count: number, nameOf: (i: number) => string): Named[] =>
  Array.from({ length: count }, (_, i) => ({ id: `${tag}${i}`, name: nameOf(i), n: i }));

describe('Named handlers across OS processes (test/fixtures/queue-named-child.ts)', () => {
  const prefix = uniquePrefix('queue-named-proc');
  const ctx = queueAppAndClient(prefix);

  /**
   * A worker process with the handlers `names` ('a:2,b:1': name 'a' concurrency 2, 'b' 1), on the
   * test server or on the one at `url`.
   */
  const spawnNamed = (
    queue: string,
    names: string,
    url = testRedisUrl(),
  ): Promise<QueueWorkerChild> =>
    spawnQueueWorker(
      { REDIS_URL: url, PREFIX: prefix, QUEUE: queue, NAMES: names },
      'test/fixtures/queue-named-child.ts',
    );
  /** Stops a worker process gracefully (SIGTERM: it drains), as a deploy does. */
  const stop = async (w: QueueWorkerChild) => {
    const closed = lineFrom(w.child, /^closed$/);
    w.child.kill('SIGTERM');
    await closed;
    await exited(w.child);
  };
  /** Enqueues each task with its name and the payload { name, n, ...extra }. */
  const enqueue = (queue: string, list: Named[], extra: { holdUntil?: number } = {}) =>
    Promise.all(
      list.map(({ id, name, n }) =>
        ctx.queues.enqueue(queue, id, { name, payload: { name, n, ...extra } }),
      ),
    );
  const completed = (queue: string, count: number) =>
    waitFor(
      `${count} completed on '${queue}'`,
      async () => (await ctx.queues.stats(queue)).completed === count,
      30_000,
      20,
    );
  /** A hash the fixture records in, for the workers of `queue`. */
  const obsHash = (queue: string, name: string) =>
    ctx.redis.hgetall(`${prefix}obs:${queue}:${name}`);
  /** `ran` records of the fixture: id -> [handler's name, task.name, payload.name, n, pid]. */
  const ranRecords = async (queue: string) =>
    new Map(Object.entries(await obsHash(queue, 'ran')).map(([id, line]) => [id, line.split(' ')]));

  it('3 processes with handlers a (concurrency 2) and b (1): 300 mixed tasks each run once, in the handler of its name, spread over the processes, each name at most its concurrency per process (and reaching it in every process)', async () => {
    const queue = 'same';
    const workers = await Promise.all([0, 1, 2].map(() => spawnNamed(queue, 'a:2,b:1')));
    const pids = workers.map((w) => w.pid);

    // 9 tasks 'a' that wait until 6 run at once: each process holds at most 3 (its slots, 2 + 1
    // added up) and runs at most 2 of one name, so all three processes run 2 each. Then 9 'b' that
    // wait until 3 run at once: 1 in each process.
    const fillA = tasks('fill-a', 9, () => 'a');
    await enqueue(queue, fillA, { holdUntil: 6 });
    await completed(queue, 9);
    const fillB = tasks('fill-b', 9, () => 'b');
    await enqueue(queue, fillB, { holdUntil: 3 });
    await completed(queue, 18);
    // Then 282 of both names, run as they come.
    const mixed = tasks('m', 282, (i) => (i % 3 === 2 ? 'b' : 'a'));
    await enqueue(queue, mixed);
    await waitQueueDrained(ctx.queues, queue);
    const all = [...fillA, ...fillB, ...mixed];

    // The queue ends empty: every task completed, none dead.
    expect(await ctx.queues.stats(queue)).toMatchObject(queueStats({ completed: 300 }));
    // Each ran exactly once (no process crashed), and no other task ran.
    const runs = await obsHash(queue, 'runs');
    expect(Object.keys(runs).sort()).toEqual(all.map((t) => t.id).sort());
    expect(Object.entries(runs).filter(([, n]) => n !== '1')).toEqual([]);
    // Each in the handler of its own name, with its own payload, in one of the three processes.
    const ran = await ranRecords(queue);
    expect(all.map((t) => [t.id, ...ran.get(t.id)!.slice(0, 4)])).toEqual(
      all.map((t) => [t.id, t.name, t.name, t.name, String(t.n)]),
    );
    const perPid = new Map<string, number>();
    for (const [, , , , pid] of ran.values()) perPid.set(pid, (perPid.get(pid) ?? 0) + 1);
    expect([...perPid.keys()].sort()).toEqual([...pids].sort());
    expect(await obsHash(queue, 'stuck')).toEqual({});

    // The peaks: each name at its concurrency in every process, never over; the three processes
    // together ran 6 'a' and 3 'b' at once (a name's concurrency is per process).
    const peaks: Record<string, string> = { '*:a': '6', '*:b': '3' };
    for (const pid of pids) Object.assign(peaks, { [`${pid}:a`]: '2', [`${pid}:b`]: '1' });
    expect(await obsHash(queue, 'peaks')).toEqual(peaks);
    const running = await obsHash(queue, 'running');
    expect(Object.values(running).every((n) => n === '0')).toBe(true);
    console.log(`tasks run per process: ${[...perPid.values()].join(', ')}`);

    await Promise.all(workers.map(stop));
  }, 120_000);

  it("a process with only handler 'a' buries the tasks named 'b' it claims while no live worker handles 'b' (dead at once, UnknownTaskNameError naming 'b'); while a process with 'b' runs beside it, it leaves them to that one (each runs there once, none dead); requeueDead runs the buried ones there once", async () => {
    const queue = 'differ';
    // The old instance alone: it knows 'a' only.
    const old = await spawnNamed(queue, 'a:2');
    const first = tasks('old', 20, (i) => (i % 2 === 0 ? 'a' : 'b'));
    const [named, unknown] = [
      first.filter((t) => t.name === 'a'),
      first.filter((t) => t.name === 'b'),
    ];
    await enqueue(queue, first);
    await waitFor(
      '10 completed and 10 dead',
      async () => {
        const s = await ctx.queues.stats(queue);
        return s.completed === 10 && s.dead === 10;
      },
      30_000,
      20,
    );
    /** What the old instance says of a task named 'b' it claimed. */
    const buriedBecause = (id: string) =>
      `queue '${queue}': task '${id}' is named 'b' and this worker has no handler for it (its handlers: 'a')`;
    for (const { id } of unknown) {
      const task = await ctx.queues.get(queue, id);
      // Dead on its first claim, without a retry (maxAttempts is 5 by default).
      expect(task).toMatchObject({ state: 'dead', attempts: 1, name: 'b' });
      expect(task?.error).toMatchObject({ name: 'UnknownTaskNameError' });
      expect(task?.lastError).toBe(buriedBecause(id));
    }
    // No handler ran them; the tasks of 'a' ran once each, in the old process.
    const runs = await obsHash(queue, 'runs');
    expect(Object.keys(runs).sort()).toEqual(named.map((t) => t.id).sort());
    expect(Object.values(runs).every((n) => n === '1')).toBe(true);
    expect(
      [...(await ranRecords(queue)).values()].every(
        ([h, , , , pid]) => h === 'a' && pid === old.pid,
      ),
    ).toBe(true);

    // The deploy: an instance with 'a' and 'b' starts while the old one still runs. The old one
    // leaves the tasks named 'b' it claims to the new one (the workers registry lists a live
    // handler of 'b'): each runs once there, none is buried.
    const next = await spawnNamed(queue, 'a:2,b:1');
    const during = tasks('mid', 30, () => 'b');
    await enqueue(queue, during);
    await waitFor(
      'the 30 completed',
      async () => (await ctx.queues.stats(queue)).completed === 40,
      30_000,
      20,
    );
    expect(await ctx.queues.stats(queue)).toMatchObject({ dead: 10 });
    const runsDuring = await obsHash(queue, 'runs');
    const ranDuring = await ranRecords(queue);
    for (const { id, n } of during) {
      const task = await ctx.queues.get(queue, id);
      expect([task?.state, task?.attempts, runsDuring[id], ranDuring.get(id)]).toEqual([
        'completed',
        1,
        '1',
        ['b', 'b', 'b', String(n), next.pid],
      ]);
    }

    // Once the old one stopped, requeueDead brings the tasks it buried alone back, to run in 'b'.
    await stop(old);
    const dead = unknown.map((t) => t.id);
    expect(await ctx.queues.requeueDead(queue, dead)).toBe(dead.length);
    await completed(queue, 50);
    expect(await ctx.queues.stats(queue)).toMatchObject(queueStats({ completed: 50 }));
    const all = [...first, ...during];
    const after = await obsHash(queue, 'runs');
    expect(Object.keys(after).sort()).toEqual(all.map((t) => t.id).sort());
    expect(Object.entries(after).filter(([, n]) => n !== '1')).toEqual([]);
    const ran = await ranRecords(queue);
    const bs = all.filter((t) => t.name === 'b');
    expect(bs.map((t) => [t.id, ...ran.get(t.id)!])).toEqual(
      bs.map((t) => [t.id, 'b', 'b', 'b', String(t.n), next.pid]),
    );

    await stop(next);
  }, 120_000);

  /**
   * Two worker processes on a server of their own (FLUSHALL would empty the other test files'
   * data), on queue 'pair': X with handler 'a' only, Y with 'b' only; one slot each. This test's
   * module enqueues there. The fixture's holds (`holdUntil`) end when the test sets the name's
   * peak (`release`).
   */
  describe('two processes, X with handler a and Y with handler b', () => {
    const queue = 'pair';
    let server: RedisServer;
    let app: INestApplicationContext;
    let queues: QueueService;
    let obs: Redis;
    let x: QueueWorkerChild;
    let y: QueueWorkerChild;
    const peaks = () => `${prefix}obs:${queue}:peaks`;
    /** Ends the holds of `name` (the fixture waits for the name's peak to reach holdUntil). */
    const release = (name: string) => obs.hset(peaks(), `*:${name}`, 1_000);
    /** The pid of the process that ran `id` last. */
    const ranIn = async (id: string) =>
      (await obs.hget(`${prefix}obs:${queue}:ran`, id))?.split(' ').pop();

    beforeAll(async () => {
      server = await startRedisServer();
      app = await createLockApp({ redis: server.url, keyPrefix: prefix });
      queues = app.get(QueueService);
      obs = new Redis(server.url);
      [x, y] = await Promise.all([
        spawnNamed(queue, 'a:1', server.url),
        spawnNamed(queue, 'b:1', server.url),
      ]);
    }, 60_000);
    afterAll(async () => {
      // Killed: a graceful stop drains, which these tests need not wait for.
      await Promise.all(
        [x, y].map(async (w) => {
          if (!w) return;
          const done = exited(w.child);
          w.child.kill('SIGKILL');
          await done;
        }),
      );
      obs?.disconnect();
      await app?.close();
      await server?.stop();
    });
    // Holds wait again; a test's tasks are not left holding a slot for the next.
    beforeEach(() => obs.del(peaks()));
    afterEach(() => Promise.all([release('a'), release('b')]));

    it("a replace from one instance keeps the options another gave that it does not give: a worker process runs the task in its name's handler with the merged timeout and attempts, and ends expired the one whose deadline passed", async () => {
      const backoff = { type: 'fixed', delayMs: 5 } as const;
      // Another instance, which replaces what this module enqueues.
      const replacerApp = await createLockApp({
        redis: server.url,
        keyPrefix: prefix,
        instanceId: 'replacer',
      });
      try {
        // Both with their own options, due in a minute. r1 holds its handler (its holdUntil is
        // not reached) until its run times out.
        await queues.enqueue(queue, 'r1', {
          name: 'a',
          payload: { name: 'a', n: 1, holdUntil: 1_000 },
          delayMs: 60_000,
          maxAttempts: 2,
          backoff,
          timeoutMs: 60_000,
          expiresAt: Number.MAX_SAFE_INTEGER,
        });
        await queues.enqueue(queue, 'r2', {
          name: 'a',
          payload: { name: 'a', n: 2 },
          delayMs: 60_000,
          expiresInMs: 600,
        });
        // Replaced each with one option: r1 due now, r2 after its deadline.
        const replacer = replacerApp.get(QueueService);
        expect(await replacer.enqueue(queue, 'r1', { replace: true, timeoutMs: 200 })).toBe(0);
        expect(
          await replacer.enqueue(queue, 'r2', { replace: true, name: 'a', delayMs: 1_200 }),
        ).toBe(0);
      } finally {
        await replacerApp.close();
      }
      const ended = async (id: string) =>
        ['completed', 'dead', 'expired'].includes((await queues.get(queue, id))?.state ?? '');
      await waitFor(
        'r1 and r2 ended',
        async () => (await ended('r1')) && (await ended('r2')),
        10_000,
        20,
      );
      // r1 ran in X's handler 'a' (its name, kept), timed out after the replace's 200 ms each
      // time, and died after its own two attempts. (A task without its name dies at its first
      // claim: no worker without a name runs here.)
      expect(await queues.get(queue, 'r1')).toMatchObject({
        state: 'dead',
        name: 'a',
        attempts: 2,
        error: { name: 'TaskTimeoutError' },
      });
      expect(await obs.hgetall(`${prefix}obs:${queue}:runs`)).toEqual({ r1: '2' });
      expect(await ranIn('r1')).toBe(x.pid);
      // r2 kept its deadline: it never ran.
      expect(await queues.get(queue, 'r2')).toMatchObject({
        state: 'expired',
        name: 'a',
        attempts: 0,
      });
    }, 30_000);

    it("after Redis lost everything (FLUSHALL), the process without a name's handler leaves that name's tasks to the process that has one instead of burying them, and writes its own registry entry again at once", async () => {
      // Each process's one slot taken, X's first: X never read the registry for a name.
      await queues.enqueue(queue, 'a1', {
        name: 'a',
        payload: { name: 'a', n: 1, holdUntil: 1_000 },
      });
      await waitFor('a1 running in X', async () => (await ranIn('a1')) === x.pid);
      await queues.enqueue(queue, 'b1', {
        name: 'b',
        payload: { name: 'b', n: 1, holdUntil: 1_000 },
      });
      await waitFor('b1 running in Y', async () => (await ranIn('b1')) === y.pid);
      await obs.flushall();
      await queues.enqueue(queue, 'b2', { name: 'b', payload: { name: 'b', n: 2 } });
      // X's slot frees: X claims b2 and reads a registry without Y's entry (nor its own).
      await release('a');
      await waitFor('b2 handled by X', async () =>
        ['delayed', 'dead'].includes((await queues.get(queue, 'b2'))?.state ?? ''),
      );
      expect(await queues.get(queue, 'b2')).toMatchObject({ state: 'delayed', attempts: 0 });
      expect((await queues.workers(queue)).map((w) => w.pid)).toContain(Number(x.pid));
      // Y's slot frees: b2 runs there, once.
      await release('b');
      await waitFor(
        'b2 completed',
        async () => (await queues.get(queue, 'b2'))?.state === 'completed',
        10_000,
        20,
      );
      expect(await ranIn('b2')).toBe(y.pid);
      expect(await obs.hget(`${prefix}obs:${queue}:runs`, 'b2')).toBe('1');
      expect(await queues.stats(queue)).toMatchObject({ dead: 0, completed: 1 });
    }, 30_000);
  });
});
