import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import type { Observable, Subscription } from 'rxjs';
import { QueueService } from '../../lib';
import type { QueueEvent } from '../../lib/queue/interfaces/queue-event.interface';
import type { QueueTaskInfo } from '../../lib/queue/interfaces/task.interface';
import { QueueEventReaders } from '../../lib/queue/queue-events';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { resolveModuleOptions } from '../../lib/options/resolve-options';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import { createLockApp, deferred, redisTimeMs, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

// One reader per queue and process serves every events() subscriber and every waitFor: a
// subscriber's `from` must not move it (docs/queue-events.md), and a waitFor whose task is gone
// must not take an earlier run's outcome while the reader is behind.

/** Subscribes and records what arrives. */
function collect(events: Observable<QueueEvent>): {
  events: QueueEvent[];
  subscription: Subscription;
} {
  const seen: QueueEvent[] = [];
  const subscription = events.subscribe({ next: (e) => seen.push(e) });
  return { events: seen, subscription };
}

/** The XREAD connections of the server, from CLIENT LIST. */
async function xreadClients(redis: Redis): Promise<string[]> {
  const list = (await redis.client('LIST')) as string;
  return list.split('\n').filter((line) => / cmd=xread\b/.test(line));
}

/** Appends the entries (field/value lists) to the stream in one atomic step; their ids. */
async function appendAtomically(redis: Redis, key: string, entries: string[][]): Promise<string[]> {
  return (await redis.eval(
    `local ids = {}
     for _, fields in ipairs(cjson.decode(ARGV[1])) do
       ids[#ids + 1] = redis.call('XADD', KEYS[1], '*', unpack(fields))
     end
     return ids`,
    1,
    key,
    JSON.stringify(entries),
  )) as string[];
}

/** `n` entries that end no task. */
/** Appends markers to stream `key` until subscriber `live` got one: its reader reads. */
async function reading(redis: Redis, key: string, live: { events: QueueEvent[] }): Promise<void> {
  let marker: string | undefined;
  await waitFor('the subscriber to read', async () => {
    if (live.events.some((e) => e.eventId === marker)) return true;
    marker = (await redis.xadd(key, '*', 't', 'paused'))!;
    return false;
  });
}

const fillers = (n: number): string[][] =>
  Array.from({ length: n }, (_, i) => ['t', 'progress', 'i', 'filler', 'p', String(i)]);

describe('the shared event reader of a queue (dedicated redis-server)', () => {
  let server: RedisServer;
  let redis: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    redis = new Redis(server.url);
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

  describe('events() from: one subscriber never moves the reader of the others', () => {
    let app: INestApplicationContext | undefined;
    afterEach(async () => {
      await app?.close();
      app = undefined;
      await waitFor('no reader left', async () => (await xreadClients(redis)).length === 0);
    });

    it("a subscriber from an id ahead of the stream skips up to it alone: waitFor and a 'now' subscriber of the process see what is written meanwhile", async () => {
      const prefix = uniquePrefix('reader-ahead');
      app = await createLockApp({ redis: server.url, keyPrefix: prefix });
      const queues = app.get(QueueService);
      const key = queueRedisKeys(prefix, 'jobs').events;
      // "After an id 10 minutes from now", as a client clock ahead of Redis's gives.
      const aheadMs = (await redisTimeMs(redis)) + 600_000;
      const ahead = collect(queues.events('jobs', { from: `${aheadMs}-0` }));
      const live = collect(queues.events('jobs'));
      await waitFor('the reader blocked', async () => (await xreadClients(redis)).length === 1);

      const worker = queues.process('jobs', async () => 'ok');
      await queues.enqueue('jobs', 'X');
      const outcome = await queues
        .waitFor('jobs', 'X', { timeoutMs: 5_000 })
        .catch((err: Error) => `${err.name}: ${err.message}`);
      expect(outcome).toEqual({ state: 'completed', result: 'ok' });
      await waitFor('the completed event on the live subscription', () =>
        live.events.some((e) => e.type === 'completed'),
      );
      expect(live.events.map((e) => `${e.type}:${e.taskId}`)).toEqual([
        'enqueued:X',
        'active:X',
        'completed:X',
      ]);
      await worker.close();

      // Entries at and after that id: the one ahead gets those after it, the live one all.
      const at = await redis.xadd(key, `${aheadMs}-0`, 't', 'paused');
      const after = await redis.xadd(key, `${aheadMs}-1`, 't', 'resumed');
      await waitFor('the entry after the id on both', () =>
        [ahead, live].every((c) => c.events.some((e) => e.eventId === after)),
      );
      expect(ahead.events.map((e) => e.eventId)).toEqual([after]);
      expect(live.events.slice(3).map((e) => e.eventId)).toEqual([at, after]);
      ahead.subscription.unsubscribe();
      live.subscription.unsubscribe();
    });

    it("subscribers from 'start' and from an old id read the past on their own (in order, once each): waitFor does not take an earlier run's outcome", async () => {
      const prefix = uniquePrefix('reader-start');
      app = await createLockApp({ redis: server.url, keyPrefix: prefix });
      const queues = app.get(QueueService);
      const key = queueRedisKeys(prefix, 'jobs').events;
      // Task X ran twice, its result not kept (so the id could be enqueued again); this process
      // has read no events so far.
      let runs = 0;
      const worker = queues.process('jobs', async () => `run ${++runs}`, {
        keepCompleted: { ageMs: 0, count: 0 },
      });
      const completedEntries = async () =>
        (await redis.xrange(key, '-', '+')).filter(([, f]) => f[1] === 'completed');
      await queues.enqueue('jobs', 'X');
      await waitFor('run 1', async () => (await completedEntries()).length === 1);
      await queues.enqueue('jobs', 'X');
      await waitFor('run 2', async () => (await completedEntries()).length === 2);
      await worker.close();
      const past = (await redis.xrange(key, '-', '+')).map(([id]) => id);
      const firstCompleted = (await completedEntries())[0][0];

      const fromStart = collect(queues.events('jobs', { from: 'start' }));
      const fromOld = collect(queues.events('jobs', { from: firstCompleted }));
      const outcome = await queues.waitFor('jobs', 'X', { timeoutMs: 5_000 }).then(
        (o) => o,
        (err: Error) => `${err.name}: ${err.message}`,
      );
      // Its last run ended and was forgotten before the call: unknown (never run 1's outcome).
      expect(outcome).toBe(
        "QueueError: queue 'jobs': task 'X' is unknown: never enqueued, or finished and no longer kept (keepCompleted / keepDead)",
      );

      const added = await redis.xadd(key, '*', 't', 'paused');
      await waitFor('the new entry on both', () =>
        [fromStart, fromOld].every((c) => c.events.some((e) => e.eventId === added)),
      );
      expect(fromStart.events.map((e) => e.eventId)).toEqual([...past, added]);
      expect(fromOld.events.map((e) => e.eventId)).toEqual([
        ...past.slice(past.indexOf(firstCompleted) + 1),
        added,
      ]);
      fromStart.subscription.unsubscribe();
      fromOld.subscription.unsubscribe();
    });
  });

  describe('waitFor of a task not found while the reader is behind', () => {
    const prefix = uniquePrefix('reader-behind');
    let connection: RedisLockConnection;
    let readers: QueueEventReaders | undefined;
    let n = 0;

    beforeAll(() => {
      connection = new RedisLockConnection(
        resolveModuleOptions({ redis: server.url, keyPrefix: prefix }),
      );
    });
    afterEach(async () => {
      readers?.close();
      await waitFor('no reader left', async () => (await xreadClients(redis)).length === 0);
    });
    afterAll(() => connection.close());

    // Task X ended twice (run 1, then again with the same id: run 2) and was not kept; both
    // ending events lie after the reader's position, thousands of entries ahead of it, when the
    // waitFor starts (the reader reads 1,000 per XREAD).
    it.each([
      {
        run1: ['t', 'completed', 'i', 'X', 'r', '"run 1"'],
        run2: ['t', 'completed', 'i', 'X', 'r', '"run 2"'],
        expected: { state: 'completed', result: 'run 2' },
      },
      {
        run1: ['t', 'completed', 'i', 'X', 'r', '"run 1"'],
        run2: ['t', 'dead', 'i', 'X', 'e', '{"name":"Error","message":"run 2 failed"}'],
        expected: { state: 'dead', error: { name: 'Error', message: 'run 2 failed' } },
      },
      {
        run1: ['t', 'completed', 'i', 'X', 'r', '"run 1"'],
        run2: ['t', 'removed', 'i', 'X'],
        expected: "QueueError: queue '<queue>': task 'X' was removed before it finished",
      },
    ])(
      "settles on the id's LAST ending event up to the look-up, not the first one read ($run2.1 after completed)",
      async ({ run1, run2, expected }) => {
        const queue = `behind${++n}`;
        const key = queueRedisKeys(prefix, queue).events;
        let lookups = 0;
        // Not found: ended and not kept.
        const getInfo = async (): Promise<QueueTaskInfo | undefined> => {
          lookups++;
          return undefined;
        };
        readers = new QueueEventReaders(
          connection,
          (name) => queueRedisKeys(prefix, name),
          getInfo,
        );
        const live = collect(readers.events(queue));
        // The reader has its position once the subscriber gets an entry written after it.
        await reading(redis, key, live);
        const before = live.events.length;
        const ids = await appendAtomically(redis, key, [
          ...fillers(5_000),
          run1,
          ...fillers(1_500),
          run2,
          ...fillers(10),
        ]);
        // Registered at once: the reader is still thousands of entries before run 1's end.
        const outcome = await readers.waitFor(queue, 'X', { timeoutMs: 15_000 }).then(
          (o) => o,
          (err: Error) => `${err.name}: ${err.message}`,
        );
        expect(outcome).toEqual(
          typeof expected === 'string' ? expected.replace('<queue>', queue) : expected,
        );
        expect(lookups).toBe(1);
        // The subscriber of the same reader got every entry, in order, once.
        await waitFor(
          'every entry on the subscriber',
          () => live.events.length >= before + ids.length,
        );
        expect(live.events.slice(before).map((e) => e.eventId)).toEqual(ids);
        live.subscription.unsubscribe();
      },
    );

    it('settles on the LAST ending event when the reader read both while the look-up was under way', async () => {
      const queue = `behind${++n}`;
      const key = queueRedisKeys(prefix, queue).events;
      const gate = deferred();
      let lookups = 0;
      // Not found (ended and not kept), answered only once the test says so.
      const getInfo = async (): Promise<QueueTaskInfo | undefined> => {
        lookups++;
        await gate.promise;
        return undefined;
      };
      readers = new QueueEventReaders(connection, (name) => queueRedisKeys(prefix, name), getInfo);
      const live = collect(readers.events(queue));
      await reading(redis, key, live);
      const waiting = readers.waitFor(queue, 'X', { timeoutMs: 15_000 }).then(
        (o) => o,
        (err: Error) => `${err.name}: ${err.message}`,
      );
      await waitFor('the look-up', () => lookups === 1);
      const [, run2] = await appendAtomically(redis, key, [
        ['t', 'completed', 'i', 'X', 'r', '"run 1"'],
        ['t', 'completed', 'i', 'X', 'r', '"run 2"'],
      ]);
      await waitFor('both read', () => live.events.some((e) => e.eventId === run2));
      gate.resolve();
      expect(await waiting).toEqual({ state: 'completed', result: 'run 2' });
      live.subscription.unsubscribe();
    });
  });
});
