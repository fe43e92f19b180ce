import 'reflect-metadata';
import { exited, lineFrom } from '../support/child';
import {
  queueAppAndClient,
  queueStats,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';
import { spawnQueueWorker, waitQueueDrained, type QueueWorkerChild } from '../support/queue-crash';

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

  /** A worker process with the handlers `names` ('a:2,b:1': name 'a' concurrency 2, 'b' 1). */
  const spawnNamed = (queue: string, names: string): Promise<QueueWorkerChild> =>
    spawnQueueWorker(
      { REDIS_URL: testRedisUrl(), PREFIX: prefix, QUEUE: queue, NAMES: names },
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
});
