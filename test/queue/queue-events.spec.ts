import 'reflect-metadata';
import { Logger, type INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { QueueService, UnrecoverableTaskError } from '../../lib';
import type { Observable, Subscription } from 'rxjs';
import { QueueError, QueueWaitTimeoutError, RedisLockOptionsError } from '../../lib/errors';
import type { QueueEvent, TaskOutcome } from '../../lib/queue/interfaces/queue-event.interface';
import type { QueueTaskInfo } from '../../lib/queue/interfaces/task.interface';
import { QueueEventReaders, compareEventIds } from '../../lib/queue/queue-events';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { resolveModuleOptions } from '../../lib/options/resolve-options';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import {
  blockedClients,
  commandCalls,
  createLockApp,
  deferred,
  redisTimeMs,
  uniquePrefix,
  waitFor,
} from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/**
 * Stands in for the queue's scripts: a task's state in a hash and its event in the stream, written
 * together (MULTI), as the scripts write them; `getInfo` reads the hash as `QueueService.get`.
 */
class FakeQueue {
  /** getInfo calls so far. */
  lookups = 0;
  /** Run inside getInfo before it reads the state, and after it read it (the race tests). */
  beforeRead?: (id: string) => Promise<void>;
  afterRead?: (id: string) => Promise<void>;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    readonly name: string,
  ) {}

  get eventsKey(): string {
    return queueRedisKeys(this.prefix, this.name).events;
  }

  get stateKey(): string {
    return `${this.prefix}fake:${this.name}:state`;
  }

  readonly getInfo = async (queue: string, id: string): Promise<QueueTaskInfo | undefined> => {
    expect(queue).toBe(this.name);
    this.lookups++;
    await this.beforeRead?.(id);
    const raw = await this.redis.hget(this.stateKey, id);
    await this.afterRead?.(id);
    return raw === null
      ? undefined
      : { queue, id, time: 0, attempts: 1, payload: undefined, ...JSON.parse(raw) };
  };

  /** A task in a running state, enqueued at the Redis clock's now. */
  async add(id: string, state: 'ready' | 'leased' | 'delayed' = 'ready'): Promise<void> {
    const enqueuedAt = await redisTimeMs(this.redis);
    await this.redis
      .multi()
      .hset(this.stateKey, id, JSON.stringify({ state, enqueuedAt }))
      .xadd(this.eventsKey, 'MAXLEN', '~', 10_000, '*', 't', 'enqueued', 'i', id)
      .exec();
  }

  /** Ends task `id` as `outcome` (kept, or forgotten as keepCompleted: 0 does) with its event. */
  async finish(id: string, outcome: TaskOutcome, keep = true): Promise<string> {
    const fields =
      outcome.state === 'completed'
        ? outcome.result === undefined
          ? []
          : ['r', JSON.stringify(outcome.result)]
        : ['e', JSON.stringify(outcome.error)];
    const info = { ...outcome };
    const m = this.redis.multi();
    if (keep) m.hset(this.stateKey, id, JSON.stringify(info));
    else m.hdel(this.stateKey, id);
    m.xadd(this.eventsKey, 'MAXLEN', '~', 10_000, '*', 't', outcome.state, 'i', id, ...fields);
    const replies = await m.exec();
    return replies![1][1] as string;
  }

  /** Appends an entry with these fields; resolves with its id. */
  async emit(...fields: (string | number)[]): Promise<string> {
    return (await this.redis.xadd(this.eventsKey, '*', ...fields))!;
  }
}

/** Subscribes and records what arrives. */
function collect(events: Observable<QueueEvent>): {
  events: QueueEvent[];
  completed: () => boolean;
  subscription: Subscription;
} {
  const seen: QueueEvent[] = [];
  let done = false;
  const subscription = events.subscribe({
    next: (e) => seen.push(e),
    complete: () => (done = true),
  });
  return { events: seen, completed: () => done, subscription };
}

/**
 * Waits until a subscriber from 'now' reads: appends marker entries until one arrives (its
 * reader had no position before); resolves with the id of the first marker seen.
 */
async function primed(queue: FakeQueue, seen: QueueEvent[]): Promise<string> {
  let marker: QueueEvent | undefined;
  await waitFor('the subscriber to read', async () => {
    marker = seen.find((e) => e.taskId === '__marker__');
    if (!marker) await queue.emit('t', 'enqueued', 'i', '__marker__');
    return marker !== undefined;
  });
  return marker!.eventId;
}

/** The XREAD connections of the server, from CLIENT LIST. */
async function xreadClients(redis: Redis): Promise<string[]> {
  const list = (await redis.client('LIST')) as string;
  return list.split('\n').filter((line) => / cmd=xread\b/.test(line));
}

describe('QueueEventReaders (dedicated redis-server, events written by hand)', () => {
  let server: RedisServer;
  let redis: Redis;
  let connection: RedisLockConnection;
  let readers: QueueEventReaders;
  let prefix: string;
  let n = 0;
  const queueOf = (name = `q${++n}`) => new FakeQueue(redis, prefix, name);
  const newReaders = (q: FakeQueue) =>
    new QueueEventReaders(connection, (name) => queueRedisKeys(prefix, name), q.getInfo);

  beforeAll(async () => {
    server = await startRedisServer();
    redis = new Redis(server.url);
    prefix = uniquePrefix('queue-events');
    connection = new RedisLockConnection(
      resolveModuleOptions({ redis: server.url, keyPrefix: prefix }),
    );
  });
  afterEach(() => readers?.close());
  afterAll(async () => {
    await connection.close();
    redis.disconnect();
    await server.stop();
  });

  describe('events()', () => {
    it("from 'now' delivers only what is written after, with every field parsed", async () => {
      const q = queueOf();
      readers = newReaders(q);
      await q.emit('t', 'enqueued', 'i', 'before');
      const c = collect(readers.events(q.name));
      const marker = await primed(q, c.events);
      const ids = [
        await q.emit('t', 'active', 'i', 'a', 'a', '2'),
        await q.emit('t', 'progress', 'i', 'a', 'p', '{"pct":40}'),
        await q.emit('t', 'completed', 'i', 'a', 'a', '2', 'r', '{"order":42}'),
        await q.emit(
          't',
          'retrying',
          'i',
          'b',
          'a',
          '1',
          'e',
          '{"name":"TypeError","message":"boom","stack":"s"}',
          'd',
          '1000',
        ),
        await q.emit('t', 'dead', 'i', 'c', 'e', 'lease expired'),
        await q.emit('t', 'paused'),
      ];
      await waitFor('the 6 events', () => c.events.some((e) => e.eventId === ids[5]));
      const after = c.events.filter(
        (e) => e.taskId !== '__marker__' && compareEventIds(e.eventId, marker) > 0,
      );
      expect(c.events.some((e) => e.taskId === 'before')).toBe(false);
      expect(after.map((e) => e.eventId)).toEqual(ids);
      const at = (id: string) => Number(id.split('-')[0]);
      expect(after).toEqual([
        { eventId: ids[0], queue: q.name, at: at(ids[0]), type: 'active', taskId: 'a', attempt: 2 },
        {
          eventId: ids[1],
          queue: q.name,
          at: at(ids[1]),
          type: 'progress',
          taskId: 'a',
          progress: { pct: 40 },
        },
        {
          eventId: ids[2],
          queue: q.name,
          at: at(ids[2]),
          type: 'completed',
          taskId: 'a',
          attempt: 2,
          result: { order: 42 },
        },
        {
          eventId: ids[3],
          queue: q.name,
          at: at(ids[3]),
          type: 'retrying',
          taskId: 'b',
          attempt: 1,
          error: { name: 'TypeError', message: 'boom', stack: 's' },
          delayMs: 1000,
        },
        {
          eventId: ids[4],
          queue: q.name,
          at: at(ids[4]),
          type: 'dead',
          taskId: 'c',
          error: { name: 'Error', message: 'lease expired' },
        },
        { eventId: ids[5], queue: q.name, at: at(ids[5]), type: 'paused' },
      ]);
      c.subscription.unsubscribe();
    });

    it("from 'start' delivers every entry still in the stream, in order, then the new ones", async () => {
      const q = queueOf();
      readers = newReaders(q);
      const old: string[] = [];
      for (let i = 0; i < 5; i++) old.push(await q.emit('t', 'enqueued', 'i', `t${i}`));
      const c = collect(readers.events(q.name, { from: 'start' }));
      await waitFor('the 5 old events', () => c.events.length === 5);
      const added = await q.emit('t', 'removed', 'i', 't0');
      await waitFor('the new event', () => c.events.length === 6);
      expect(c.events.map((e) => e.eventId)).toEqual([...old, added]);
      c.subscription.unsubscribe();
    });

    it('resumes from an event id while others read live: misses none, duplicates none (2,500 entries behind)', async () => {
      const q = queueOf();
      readers = newReaders(q);
      const live = collect(readers.events(q.name, { from: 'start' }));
      const first = collect(readers.events(q.name, { from: 'start' }));
      // A writer that keeps going while the subscriber leaves and comes back.
      const written: string[] = [];
      let writing = true;
      const writer = (async () => {
        while (writing || written.length < 3_000) {
          const batch = redis.pipeline();
          for (let k = 0; k < 50; k++)
            batch.xadd(q.eventsKey, '*', 't', 'enqueued', 'i', `t${written.length + k}`);
          for (const [, id] of (await batch.exec())!) written.push(id as string);
        }
      })();
      await waitFor('100 events on the first subscription', () => first.events.length >= 100);
      first.subscription.unsubscribe();
      const lastSeen = first.events[first.events.length - 1].eventId;
      // Come back once the live reader is well ahead: the resumed one has to read up first.
      await waitFor(
        '2,500 more events read live',
        () => live.events.length >= first.events.length + 2_500,
      );
      const resumed = collect(readers.events(q.name, { from: lastSeen }));
      writing = false;
      await writer;
      await waitFor(
        'every event on the live subscription',
        () => live.events.length === written.length,
        15_000,
      );
      await waitFor(
        'every event after the last seen on the resumed subscription',
        () => first.events.length + resumed.events.length >= written.length,
        15_000,
      );
      expect(live.events.map((e) => e.eventId)).toEqual(written);
      expect([...first.events, ...resumed.events].map((e) => e.eventId)).toEqual(written);
      live.subscription.unsubscribe();
      resumed.subscription.unsubscribe();
    });

    it('serves every subscriber and waiter of a queue with one blocking connection, closed after the last one left', async () => {
      const q = queueOf();
      readers = newReaders(q);
      const subs = Array.from({ length: 5 }, () =>
        collect(readers.events(q.name, { from: 'start' })),
      );
      for (let i = 0; i < 100; i++) await q.add(`w${i}`);
      const waits = Array.from({ length: 100 }, (_, i) => readers.waitFor(q.name, `w${i}`));
      await waitFor('the 100 look-ups', () => q.lookups === 100);
      await waitFor('one XREAD blocked', async () => (await blockedClients(redis)) === 1);
      expect(await xreadClients(redis)).toHaveLength(1);
      for (let i = 0; i < 100; i++) await q.finish(`w${i}`, { state: 'completed', result: i });
      expect(await Promise.all(waits)).toEqual(
        Array.from({ length: 100 }, (_, i) => ({ state: 'completed', result: i })),
      );
      for (const s of subs) s.subscription.unsubscribe();
      expect(readers.readingQueues).toEqual([q.name]);
      // It lingers 2 s for a next caller, then stops and closes its connection.
      await waitFor('the reader to stop', () => readers.readingQueues.length === 0, 5_000);
      await waitFor('its connection closed', async () => (await xreadClients(redis)).length === 0);
    });

    it('rejects a bad from, and events when eventsMaxLen is 0', async () => {
      const q = queueOf();
      readers = newReaders(q);
      for (const from of ['later', '1-2-3', '-1-0', '99999999999999999999-0', 12, '']) {
        expect(() => readers.events(q.name, { from: from as string })).toThrow(
          RedisLockOptionsError,
        );
      }
      expect(() => readers.events(q.name, { from: 'later' })).toThrow(
        "invalid option 'from': expected 'now', 'start' or an event id '<ms>-<seq>' (the eventId of a QueueEvent), got 'later'",
      );
      expect(() => readers.events(q.name, { since: 'now' } as never)).toThrow(
        RedisLockOptionsError,
      );
      const off = new RedisLockConnection(
        resolveModuleOptions({ redis: server.url, keyPrefix: prefix, queue: { eventsMaxLen: 0 } }),
      );
      try {
        const offReaders = new QueueEventReaders(
          off,
          (name) => queueRedisKeys(prefix, name),
          q.getInfo,
        );
        expect(() => offReaders.events(q.name)).toThrow(QueueError);
        expect(() => offReaders.events(q.name)).toThrow(
          'queue events are off (module option queue.eventsMaxLen: 0)',
        );
        await expect(offReaders.waitFor(q.name, 'x')).rejects.toThrow('queue.eventsMaxLen: 0');
      } finally {
        await off.close();
      }
    });

    it('completes every subscription on close', async () => {
      const q = queueOf();
      readers = newReaders(q);
      const c = collect(readers.events(q.name));
      readers.close();
      expect(c.completed()).toBe(true);
      expect(collect(readers.events(q.name)).completed()).toBe(true);
    });
  });

  describe('waitFor()', () => {
    it('resolves at once for a task that already finished (completed, dead, cancelled)', async () => {
      const q = queueOf();
      readers = newReaders(q);
      await q.finish('c', { state: 'completed', result: { ok: 1 } });
      await q.finish('d', { state: 'dead', error: { name: 'Error', message: 'gave up' } });
      await q.finish('x', {
        state: 'cancelled',
        error: { name: 'TaskCancelledError', message: 'no stock' },
      });
      await expect(readers.waitFor(q.name, 'c')).resolves.toEqual({
        state: 'completed',
        result: { ok: 1 },
      });
      await expect(readers.waitFor(q.name, 'd')).resolves.toEqual({
        state: 'dead',
        error: { name: 'Error', message: 'gave up' },
      });
      await expect(readers.waitFor(q.name, 'x')).resolves.toEqual({
        state: 'cancelled',
        error: { name: 'TaskCancelledError', message: 'no stock' },
      });
    });

    it('resolves on the ending event of a running task (its result, or its error)', async () => {
      const q = queueOf();
      readers = newReaders(q);
      await q.add('a', 'leased');
      await q.add('b', 'leased');
      const a = readers.waitFor(q.name, 'a');
      const b = readers.waitFor(q.name, 'b');
      await waitFor('both looked up', () => q.lookups === 2);
      await q.finish('a', { state: 'completed', result: [1, 2] });
      await q.emit('t', 'dead', 'i', 'b', 'a', '5', 'e', 'handler timed out');
      await expect(a).resolves.toEqual({ state: 'completed', result: [1, 2] });
      await expect(b).resolves.toEqual({
        state: 'dead',
        error: { name: 'Error', message: 'handler timed out' },
      });
    });

    it('sees a task that ends between the look-up reading its state and answering (subscribe-then-check race)', async () => {
      const q = queueOf();
      readers = newReaders(q);
      await q.add('r', 'leased');
      q.afterRead = async (id) => {
        await q.finish(id, { state: 'completed', result: 'late' });
      };
      await expect(readers.waitFor(q.name, 'r', { timeoutMs: 5_000 })).resolves.toEqual({
        state: 'completed',
        result: 'late',
      });
    });

    it('gets the right outcome for 300 tasks ending at random moments around their look-ups', async () => {
      const q = queueOf();
      readers = newReaders(q);
      for (let i = 0; i < 300; i++) await q.add(`t${i}`, 'leased');
      const jitter = () => new Promise<void>((r) => setTimeout(r, Math.random() * 20));
      q.afterRead = jitter;
      const waits = Array.from({ length: 300 }, (_, i) =>
        readers.waitFor(q.name, `t${i}`, { timeoutMs: 10_000 }),
      );
      // The tasks end after the reader took its position (its XREAD is the sign): one forgotten
      // before that ended before the waitFor as Redis orders them, and is unknown by design.
      await waitFor('the reader positioned', async () => (await xreadClients(redis)).length === 1);
      await Promise.all(
        Array.from({ length: 300 }, async (_, i) => {
          await jitter();
          // Some forgotten at once (keepCompleted: 0): only their event tells.
          await q.finish(`t${i}`, { state: 'completed', result: i }, i % 3 !== 0);
        }),
      );
      expect(await Promise.all(waits)).toEqual(
        Array.from({ length: 300 }, (_, i) => ({ state: 'completed', result: i })),
      );
    });

    it('resolves from the event for a task that ended and was not kept after the reader took its position', async () => {
      const q = queueOf();
      readers = newReaders(q);
      await q.add('gone', 'leased');
      // Ends (and is forgotten) after the position was taken and before the look-up.
      const gate = deferred();
      q.beforeRead = () => gate.promise;
      const waiting = readers.waitFor(q.name, 'gone');
      await waitFor('the reader positioned', async () => (await xreadClients(redis)).length === 1);
      await q.finish('gone', { state: 'completed', result: 7 }, false);
      gate.resolve();
      await expect(waiting).resolves.toEqual({ state: 'completed', result: 7 });
    });

    it('rejects an unknown task with a QueueError that says why', async () => {
      const q = queueOf();
      readers = newReaders(q);
      await expect(readers.waitFor(q.name, 'never')).rejects.toThrow(
        new QueueError(
          `queue '${q.name}': task 'never' is unknown: never enqueued, or finished and no longer kept (keepCompleted / keepDead)`,
        ),
      );
    });

    it('rejects with QueueWaitTimeoutError after timeoutMs, and leaves nothing behind', async () => {
      const q = queueOf();
      readers = newReaders(q);
      await q.add('slow', 'leased');
      const started = Date.now();
      const err = await readers
        .waitFor(q.name, 'slow', { timeoutMs: 300 })
        .catch((e: unknown) => e);
      expect(Date.now() - started).toBeGreaterThanOrEqual(295);
      expect(err).toBeInstanceOf(QueueWaitTimeoutError);
      expect(err).toMatchObject({ queue: q.name, taskId: 'slow', timeoutMs: 300 });
      expect((err as Error).message).toBe(
        `queue '${q.name}': task 'slow' did not finish within 300 ms`,
      );
      await waitFor('the reader to stop', () => readers.readingQueues.length === 0, 5_000);
    });

    it('rejects when the task is removed while waited for', async () => {
      const q = queueOf();
      readers = newReaders(q);
      await q.add('rm', 'delayed');
      const waiting = expect(readers.waitFor(q.name, 'rm')).rejects.toThrow(
        `queue '${q.name}': task 'rm' was removed before it finished`,
      );
      await waitFor('the look-up', () => q.lookups === 1);
      await q.emit('t', 'removed', 'i', 'rm');
      await waiting;
    });

    it('ignores an ending event older than the task it waits for (same id, enqueued again)', async () => {
      const q = queueOf();
      readers = newReaders(q);
      const c = collect(readers.events(q.name));
      await q.emit('t', 'progress', 'i', 'x', 'p', '1');
      await waitFor('the reader reading', () => c.events.length === 1);
      // The look-up is held until an earlier task 'again' has ended (the reader reads its 'dead'
      // while the look-up is under way) and 'again' has been enqueued anew, a millisecond later.
      const gate = deferred();
      q.beforeRead = () => gate.promise;
      const waiting = readers.waitFor(q.name, 'again');
      await waitFor('the look-up', () => q.lookups === 1);
      await q.emit('t', 'dead', 'i', 'again', 'e', 'old');
      await waitFor('the old event read', () => c.events.some((e) => e.type === 'dead'));
      const old = c.events.find((e) => e.type === 'dead')!.at;
      await waitFor('a later millisecond', async () => (await redisTimeMs(redis)) > old);
      await q.add('again', 'leased');
      gate.resolve();
      await q.finish('again', { state: 'completed', result: 'new' });
      await expect(waiting).resolves.toEqual({ state: 'completed', result: 'new' });
      c.subscription.unsubscribe();
    });

    it('rejects a bad timeoutMs with RedisLockOptionsError naming the value', async () => {
      const q = queueOf();
      readers = newReaders(q);
      for (const timeoutMs of [0, -1, 1.5, 86_400_001, '100', null]) {
        await expect(
          readers.waitFor(q.name, 'x', { timeoutMs: timeoutMs as number }),
        ).rejects.toThrow(RedisLockOptionsError);
      }
      await expect(readers.waitFor(q.name, 'x', { timeoutMs: 0 })).rejects.toThrow(
        "invalid option 'timeoutMs': expected an integer from 1 to 86400000, got 0",
      );
      expect(q.lookups).toBe(0);
    });

    it('rejects pending waiters with a QueueError on close (shutdown)', async () => {
      const q = queueOf();
      readers = newReaders(q);
      await q.add('p', 'leased');
      const waiting = readers.waitFor(q.name, 'p');
      await waitFor('the look-up', () => q.lookups === 1);
      readers.close();
      await expect(waiting).rejects.toThrow(
        `queue '${q.name}': waitFor stopped: the application is shutting down`,
      );
      await expect(readers.waitFor(q.name, 'p')).rejects.toThrow('shutting down');
      await waitFor('its connection closed', async () => (await xreadClients(redis)).length === 0);
    });

    it('looks every waiter up again when its connection was killed, and sees events trimmed meanwhile', async () => {
      const q = queueOf();
      readers = newReaders(q);
      await q.add('k1', 'leased');
      await q.add('k2', 'leased');
      const k1 = readers.waitFor(q.name, 'k1', { timeoutMs: 10_000 });
      const k2 = readers.waitFor(q.name, 'k2', { timeoutMs: 10_000 });
      await waitFor('both looked up', () => q.lookups === 2);
      await waitFor('the reader blocked', async () => (await xreadClients(redis)).length === 1);
      const id = /\bid=(\d+)/.exec((await xreadClients(redis))[0])![1];
      // Kill its connection, then (before it is back) end k1 and trim the stream: k1's event is
      // gone, only a new look-up can tell.
      await redis
        .multi()
        .client('KILL', 'ID', id)
        .hset(q.stateKey, 'k1', JSON.stringify({ state: 'completed', result: 'after the kill' }))
        .xadd(q.eventsKey, '*', 't', 'completed', 'i', 'k1', 'r', '"after the kill"')
        .xtrim(q.eventsKey, 'MAXLEN', 0)
        .exec();
      await expect(k1).resolves.toEqual({ state: 'completed', result: 'after the kill' });
      expect(q.lookups).toBeGreaterThanOrEqual(4);
      // And it reads again: k2 ends by its event.
      await waitFor(
        'the reader blocked again',
        async () => (await xreadClients(redis)).length === 1,
      );
      await q.finish('k2', { state: 'completed', result: 'k2' });
      await expect(k2).resolves.toEqual({ state: 'completed', result: 'k2' });
    });

    it('looks every waiter up again when the events after its position were trimmed before it read them', async () => {
      const q = queueOf();
      readers = newReaders(q);
      await q.add('x', 'leased');
      const x = readers.waitFor(q.name, 'x', { timeoutMs: 1_500 });
      await waitFor('looked up', () => q.lookups === 1);
      await waitFor('the reader blocked', async () => (await xreadClients(redis)).length === 1);
      const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
      // In one go, as a busy moment of this process or one script writing many would have it: an
      // event for the reader, x's end, then 300 events trimmed as the scripts trim (MAXLEN ~ 10).
      // x's event is trimmed before the reader reads it; no connection drops.
      const m = redis
        .multi()
        .xadd(q.eventsKey, '*', 't', 'progress', 'i', 'other', 'p', '1')
        .hset(q.stateKey, 'x', JSON.stringify({ state: 'completed', result: 'trimmed' }))
        .xadd(q.eventsKey, '*', 't', 'completed', 'i', 'x', 'r', '"trimmed"');
      for (let i = 0; i < 300; i++) {
        m.xadd(q.eventsKey, 'MAXLEN', '~', 10, '*', 't', 'enqueued', 'i', `burst-${i}`);
      }
      const replies = (await m.exec())!;
      const ended = replies[2][1] as string;
      const [[oldest]] = await redis.xrange(q.eventsKey, '-', '+', 'COUNT', 1);
      expect(compareEventIds(oldest, ended)).toBeGreaterThan(0);
      try {
        await expect(x).resolves.toEqual({ state: 'completed', result: 'trimmed' });
        expect(q.lookups).toBeGreaterThanOrEqual(2);
        expect(warn).toHaveBeenCalledWith(
          expect.stringMatching(
            new RegExp(
              `^queue '${q.name}': events after \\d+-\\d+ may have been trimmed before this process read them .*; every waitFor looks its task up again$`,
            ),
          ),
        );
      } finally {
        warn.mockRestore();
      }
    });

    it('on a stream that was empty when the reader started (position 0-0), the first read warns of no trim', async () => {
      const q = queueOf();
      readers = newReaders(q);
      // A dashboard's subscription on a queue whose stream does not exist yet: the reader starts
      // at 0-0. Then a task is enqueued (its event) and waited for.
      const seen = collect(readers.events(q.name));
      await waitFor('the reader blocked', async () => (await xreadClients(redis)).length === 1);
      expect(await redis.exists(q.eventsKey)).toBe(0);
      const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
      try {
        // Running, with no event yet (the stream stays empty until one ends); z still runs when
        // y's end is read.
        for (const id of ['y', 'z']) {
          await redis.hset(q.stateKey, id, JSON.stringify({ state: 'leased', enqueuedAt: 1 }));
        }
        const y = readers.waitFor(q.name, 'y', { timeoutMs: 3_000 });
        const z = readers.waitFor(q.name, 'z', { timeoutMs: 3_000 });
        await waitFor('looked up', () => q.lookups === 2);
        await q.finish('y', { state: 'completed', result: 'y' });
        await expect(y).resolves.toEqual({ state: 'completed', result: 'y' });
        await q.finish('z', { state: 'completed', result: 'z' });
        await expect(z).resolves.toEqual({ state: 'completed', result: 'z' });
        expect(warn).not.toHaveBeenCalled();
      } finally {
        warn.mockRestore();
        seen.subscription.unsubscribe();
      }
    });

    it('checks for trimmed events only while a waitFor is pending: one XRANGE per read that returned events', async () => {
      const q = queueOf();
      readers = newReaders(q);
      const seen = collect(readers.events(q.name));
      await primed(q, seen.events);
      const xranges = async () => (await commandCalls(redis)).get('xrange') ?? 0;
      // Three events, each read on its own (the reader blocked again before the next).
      const threeReads = async (tag: string) => {
        for (let i = 0; i < 3; i++) {
          await q.emit('t', 'enqueued', 'i', `${tag}${i}`);
          await waitFor('read', () => seen.events.some((e) => e.taskId === `${tag}${i}`));
          await waitFor(
            'the reader blocked again',
            async () => (await blockedClients(redis)) === 1,
          );
        }
      };
      let before = await xranges();
      await threeReads('subscribed-');
      expect((await xranges()) - before).toBe(0);
      await q.add('w', 'leased');
      const w = readers.waitFor(q.name, 'w');
      await waitFor('looked up', () => q.lookups === 1);
      await waitFor('the reader blocked', async () => (await blockedClients(redis)) === 1);
      before = await xranges();
      await threeReads('waited-');
      expect((await xranges()) - before).toBe(3);
      expect(q.lookups).toBe(1);
      await q.finish('w', { state: 'completed', result: 'w' });
      await expect(w).resolves.toEqual({ state: 'completed', result: 'w' });
      seen.subscription.unsubscribe();
    });

    it('costs at most one command per 5 s with 1,000 waiters and nothing happening (INFO commandstats)', async () => {
      const q = queueOf();
      readers = newReaders(q);
      const ids = Array.from({ length: 1_000 }, (_, i) => `idle-${i}`);
      for (const id of ids) await q.add(id, 'ready');
      const waits = ids.map((id) => readers.waitFor(q.name, id, { timeoutMs: 60_000 }));
      await waitFor('1,000 look-ups', () => q.lookups === 1_000);
      await waitFor('the reader blocked', async () => (await blockedClients(redis)) === 1);
      const before = await commandCalls(redis);
      const started = Date.now();
      await new Promise((r) => setTimeout(r, 11_000));
      const after = await commandCalls(redis);
      const seconds = (Date.now() - started) / 1000;
      const delta: Record<string, number> = {};
      for (const [name, calls] of after) {
        const d = calls - (before.get(name) ?? 0);
        if (d > 0 && name !== 'info' && name !== 'client|list') delta[name] = d;
      }
      const total = Object.values(delta).reduce((a, b) => a + b, 0);
      console.log(
        `1,000 waitFor, nothing happening: ${total} commands in ${seconds.toFixed(1)} s = ${(total / seconds).toFixed(2)}/s ${JSON.stringify(delta)}`,
      );
      // One XREAD per 5 s (two or three in 11 s), nothing per waiter.
      expect(total).toBeLessThanOrEqual(3);
      expect(Object.keys(delta)).toEqual(['xread']);
      expect(total / seconds).toBeLessThanOrEqual(5);
      expect(q.lookups).toBe(1_000);
      for (const id of ids.slice(0, 3)) await q.finish(id, { state: 'completed', result: id });
      await expect(Promise.all(waits.slice(0, 3))).resolves.toEqual(
        ids.slice(0, 3).map((id) => ({ state: 'completed', result: id })),
      );
      readers.close();
      await Promise.allSettled(waits);
    }, 40_000);
  });
});

describe('QueueService.events and waitFor over the queue scripts (one process)', () => {
  const prefix = uniquePrefix('queue-events-scripts');
  let app: INestApplicationContext;
  let queues: QueueService;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    queues = app.get(QueueService);
  });
  afterEach(() => jest.restoreAllMocks());
  afterAll(() => app.close());

  it("a worker's task: enqueued, active, progress, completed on events(); waitFor gets its result", async () => {
    const seen = collect(queues.events('run', { from: 'start' }));
    await queues.enqueue('run', 'a');
    const outcome = queues.waitFor('run', 'a');
    queues.process('run', async (task) => {
      await task.progress({ pct: 50 });
      return { ok: task.id };
    });
    await expect(outcome).resolves.toEqual({ state: 'completed', result: { ok: 'a' } });
    // Finished: resolves at once from the stored result.
    await expect(queues.waitFor('run', 'a')).resolves.toEqual({
      state: 'completed',
      result: { ok: 'a' },
    });
    await waitFor('the completed event', () => seen.events.some((e) => e.type === 'completed'));
    expect(
      seen.events.map(({ type, taskId, attempt, progress, result }) => ({
        type,
        taskId,
        attempt,
        progress,
        result,
      })),
    ).toEqual([
      { type: 'enqueued', taskId: 'a', attempt: undefined, progress: undefined, result: undefined },
      { type: 'active', taskId: 'a', attempt: 1, progress: undefined, result: undefined },
      {
        type: 'progress',
        taskId: 'a',
        attempt: undefined,
        progress: { pct: 50 },
        result: undefined,
      },
      { type: 'completed', taskId: 'a', attempt: 1, progress: undefined, result: { ok: 'a' } },
    ]);
    seen.subscription.unsubscribe();
  });

  it('dead (UnrecoverableTaskError) and cancelled tasks end their wait with the error', async () => {
    // The worker logs the dead task as an error: expected here.
    jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    await queues.enqueue('fail', 'bad');
    const dead = queues.waitFor('fail', 'bad');
    queues.process('fail', async () => {
      throw new UnrecoverableTaskError('no such order');
    });
    await expect(dead).resolves.toMatchObject({
      state: 'dead',
      error: { name: 'UnrecoverableTaskError', message: 'no such order' },
    });
    await queues.enqueue('later', 'c', { delayMs: 60_000 });
    const cancelled = queues.waitFor('later', 'c');
    await waitFor('the look-up', async () => (await queues.get('later', 'c')) !== undefined);
    expect(await queues.cancel('later', 'c', { reason: 'user left' })).toBe('cancelled');
    await expect(cancelled).resolves.toEqual({
      state: 'cancelled',
      error: { name: 'TaskCancelledError', message: 'cancelled: user left' },
    });
  });

  it('a removed task rejects its wait; a task not kept is known by its event only while waited for', async () => {
    await queues.enqueue('later', 'r', { delayMs: 60_000 });
    const removed = expect(queues.waitFor('later', 'r')).rejects.toThrow(
      "queue 'later': task 'r' was removed before it finished",
    );
    expect(await queues.remove('later', 'r')).toBe(true);
    await removed;

    await queues.enqueue('forget', 'f');
    const waiting = queues.waitFor('forget', 'f');
    queues.process('forget', async () => 'done', { keepCompleted: { ageMs: 0, count: 0 } });
    await expect(waiting).resolves.toEqual({ state: 'completed', result: 'done' });
    await expect(queues.waitFor('forget', 'f')).rejects.toThrow(
      "queue 'forget': task 'f' is unknown",
    );
  });

  it('checks its arguments at the call, and rejects pending waits when the application shuts down', async () => {
    expect(() => queues.events('', { from: 'now' })).toThrow(QueueError);
    expect(() => queues.events('q', { from: '12' })).toThrow(RedisLockOptionsError);
    // (Checked whether the façade throws at the call or rejects.)
    const call = (f: () => Promise<unknown>) => Promise.resolve().then(f);
    await expect(call(() => queues.waitFor('', 'x'))).rejects.toThrow(QueueError);
    await expect(call(() => queues.waitFor('q', { id: 1 } as never))).rejects.toThrow(QueueError);
    await expect(call(() => queues.waitFor('q', 'x', { timeoutMs: 0 }))).rejects.toThrow(
      RedisLockOptionsError,
    );

    const other = await createLockApp({ keyPrefix: prefix });
    const otherQueues = other.get(QueueService);
    await otherQueues.enqueue('later', 'shutdown', { delayMs: 60_000 });
    const pending = expect(otherQueues.waitFor('later', 'shutdown')).rejects.toThrow(
      "queue 'later': waitFor stopped: the application is shutting down",
    );
    await waitFor('the look-up', async () => (await queues.get('later', 'shutdown')) !== undefined);
    await other.close();
    await pending;
  });
});
