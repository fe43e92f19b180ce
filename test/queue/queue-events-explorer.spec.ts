import 'reflect-metadata';
import { Injectable, Logger, Scope, type INestApplicationContext } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import { QueueError } from '../../lib/errors';
import type {
  QueueEvent,
  QueueEventsOptions,
} from '../../lib/queue/interfaces/queue-event.interface';
import { OnQueueEvent, QUEUE_EVENT_METADATA } from '../../lib/queue/on-queue-event.decorator';
import { QueueEventExplorer } from '../../lib/queue/queue-event.explorer';
import { QUEUE_EVENT_TYPES } from '../../lib/queue/interfaces/queue-event.interface';
import { QueueEventReaders } from '../../lib/queue/queue-events';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { QueueService } from '../../lib/queue/queue.service';
import { resolveModuleOptions } from '../../lib/options/resolve-options';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import {
  createLockApp,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';

const prefix = uniquePrefix('queue-events-explorer');

/** What each decorated method received, by method. */
const calls = new Map<string, QueueEvent[]>();
const record = (method: string, event: QueueEvent) =>
  calls.set(method, [...(calls.get(method) ?? []), event]);
const seen = (method: string) => calls.get(method) ?? [];

@Injectable()
class OrderListener {
  @OnQueueEvent('orders', 'completed')
  completed(event: QueueEvent) {
    record('completed', event);
  }

  @OnQueueEvent('orders', ['dead', 'cancelled'])
  @OnQueueEvent('mail', 'dead')
  failed(event: QueueEvent) {
    record('failed', event);
  }

  @OnQueueEvent({ name: 'orders' }, 'enqueued')
  async enqueued(event: QueueEvent) {
    record('enqueued', event);
    if (event.taskId === 'bad-async') throw new Error('async handler failed');
  }
}

@Injectable()
class MailListener {
  @OnQueueEvent('mail', ['enqueued', 'completed', 'dead', 'paused'])
  any(event: QueueEvent) {
    record('mail-any', event);
    if (event.taskId === 'throws') throw new TypeError('sync handler failed');
  }
}

@Injectable()
class CompletedListener {
  @OnQueueEvent('e2e', 'completed')
  completed(event: QueueEvent) {
    record('e2e', event);
  }
}

@Injectable()
class OverlapListener {
  @OnQueueEvent('overlap', ['enqueued', 'completed'])
  @OnQueueEvent('overlap', 'completed')
  ended(event: QueueEvent) {
    record('overlap', event);
  }
}

@Injectable({ scope: Scope.REQUEST })
class RequestScoped {
  @OnQueueEvent('orders', 'completed')
  completed(event: QueueEvent) {
    record('request-scoped', event);
  }
}

/** A stand-in for QueueService: its `events` over real readers on the test server. */
function queuesOver(readers: QueueEventReaders) {
  return {
    events: (queue: string, options?: QueueEventsOptions) => readers.events(queue, options),
  };
}

describe('@OnQueueEvent and QueueEventExplorer', () => {
  let redis: Redis;
  let connection: RedisLockConnection;
  let readers: QueueEventReaders;
  let app: INestApplicationContext | undefined;
  const events = (queue: string) => queueRedisKeys(prefix, queue).events;

  async function start(
    providers: unknown[],
    eventReaders = readers,
  ): Promise<INestApplicationContext> {
    const moduleRef = await Test.createTestingModule({
      imports: [DiscoveryModule],
      providers: [
        QueueEventExplorer,
        { provide: QueueService, useValue: queuesOver(eventReaders) },
        // Closed by the explorer when the start fails (the readers' connection is the test's).
        { provide: RedisLockConnection, useValue: { close: () => Promise.resolve() } },
        ...(providers as never[]),
      ],
    }).compile();
    return moduleRef.init();
  }

  /** Appends markers to `queue` until `method` has seen one: its subscription reads. */
  async function primed(queue: string, method: string): Promise<void> {
    await waitFor(`${method} to get events of '${queue}'`, async () => {
      if (seen(method).some((e) => e.taskId === '__marker__')) return true;
      await redis.xadd(events(queue), '*', 't', 'enqueued', 'i', '__marker__');
      return false;
    });
  }

  beforeAll(() => {
    redis = redisClient();
    connection = new RedisLockConnection(
      resolveModuleOptions({ redis: testRedisUrl(), keyPrefix: prefix }),
    );
  });
  beforeEach(() => {
    calls.clear();
    readers = new QueueEventReaders(
      connection,
      (name) => queueRedisKeys(prefix, name),
      () => Promise.resolve(undefined),
    );
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    readers.close();
    jest.restoreAllMocks();
  });
  afterAll(async () => {
    await connection.close();
    redis.disconnect();
  });

  it('calls each method for its types and queues, from every writer, with one reader per queue', async () => {
    const duplicate = jest.spyOn(connection, 'duplicate');
    app = await start([OrderListener, MailListener]);
    await primed('orders', 'enqueued');
    await waitFor('mail subscribed', async () => {
      if (seen('mail-any').length > 0) return true;
      await redis.xadd(events('mail'), '*', 't', 'paused');
      return false;
    });
    calls.clear();
    // Three methods on 'orders', two on 'mail': one reader (one connection) per queue.
    expect(readers.readingQueues.sort()).toEqual(['mail', 'orders']);
    expect(duplicate).toHaveBeenCalledTimes(2);

    const o = events('orders');
    await redis.xadd(o, '*', 't', 'enqueued', 'i', 'o1');
    await redis.xadd(o, '*', 't', 'active', 'i', 'o1', 'a', '1');
    await redis.xadd(o, '*', 't', 'completed', 'i', 'o1', 'a', '1', 'r', '{"id":1}');
    await redis.xadd(o, '*', 't', 'cancelled', 'i', 'o2', 'e', 'out of stock');
    await redis.xadd(
      events('mail'),
      '*',
      't',
      'dead',
      'i',
      'm1',
      'e',
      '{"name":"E","message":"m"}',
    );
    await redis.xadd(events('mail'), '*', 't', 'active', 'i', 'm2');
    await waitFor('every call', () => seen('failed').length === 2 && seen('mail-any').length === 1);

    expect(seen('enqueued').map((e) => e.taskId)).toEqual(['o1']);
    expect(seen('completed')).toMatchObject([
      { type: 'completed', taskId: 'o1', result: { id: 1 } },
    ]);
    expect(seen('failed').map((e) => [e.queue, e.type, e.taskId, e.error?.message])).toEqual([
      ['orders', 'cancelled', 'o2', 'out of stock'],
      ['mail', 'dead', 'm1', 'm'],
    ]);
    // 'active' is in no method's types.
    expect(seen('mail-any').map((e) => e.type)).toEqual(['dead']);
  });

  it('calls a method once per event when its decorators name the event twice', async () => {
    app = await start([OverlapListener]);
    await primed('overlap', 'overlap');
    calls.clear();
    await redis.xadd(events('overlap'), '*', 't', 'completed', 'i', 'o1', 'a', '1');
    // Both decorators' handlers would run in one dispatch of the event.
    await waitFor('the call', () => seen('overlap').length > 0);
    expect(seen('overlap').map((e) => [e.type, e.taskId])).toEqual([['completed', 'o1']]);
  });

  it("logs a handler's error, sync or async, and goes on with the next event", async () => {
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    app = await start([OrderListener, MailListener]);
    await primed('orders', 'enqueued');
    await primed('mail', 'mail-any');
    calls.clear();
    await redis.xadd(events('orders'), '*', 't', 'enqueued', 'i', 'bad-async');
    await redis.xadd(events('orders'), '*', 't', 'enqueued', 'i', 'fine');
    await redis.xadd(events('mail'), '*', 't', 'enqueued', 'i', 'throws');
    await redis.xadd(events('mail'), '*', 't', 'enqueued', 'i', 'after');
    await waitFor(
      'both queues',
      () => seen('enqueued').length === 2 && seen('mail-any').length === 2,
    );
    await waitFor('two errors logged', () => errors.mock.calls.length === 2);
    expect(seen('enqueued').map((e) => e.taskId)).toEqual(['bad-async', 'fine']);
    expect(seen('mail-any').map((e) => e.taskId)).toEqual(['throws', 'after']);
    const messages = errors.mock.calls.map(([message]) => message as string).sort();
    expect(messages[0]).toMatch(
      /^@OnQueueEvent MailListener\.any failed on 'enqueued' of task 'throws' in queue 'mail' \(event \d+-\d+\): sync handler failed$/,
    );
    expect(messages[1]).toMatch(
      /^@OnQueueEvent OrderListener\.enqueued failed on 'enqueued' of task 'bad-async' in queue 'orders' \(event \d+-\d+\): async handler failed$/,
    );
  });

  it('stops calling on shutdown', async () => {
    app = await start([OrderListener]);
    await primed('orders', 'enqueued');
    await app.close();
    app = undefined;
    const watcher: QueueEvent[] = [];
    const sub = readers.events('orders').subscribe((e) => watcher.push(e));
    await waitFor('the watcher to read', async () => {
      if (watcher.length > 0) return true;
      await redis.xadd(events('orders'), '*', 't', 'completed', 'i', 'late');
      return false;
    });
    sub.unsubscribe();
    expect(seen('completed')).toEqual([]);
  });

  it('skips request-scoped providers with a warning', async () => {
    const warnings = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    app = await start([RequestScoped]);
    expect(warnings).toHaveBeenCalledWith(
      '@OnQueueEvent on RequestScoped.completed ignored: the provider is request-scoped',
    );
    expect(readers.readingQueues).toEqual([]);
  });

  it('fails the bootstrap, naming the methods, when events are off (eventsMaxLen: 0)', async () => {
    const off = new RedisLockConnection(
      resolveModuleOptions({
        redis: testRedisUrl(),
        keyPrefix: prefix,
        queue: { eventsMaxLen: 0 },
      }),
    );
    try {
      const offReaders = new QueueEventReaders(
        off,
        (name) => queueRedisKeys(prefix, name),
        () => Promise.resolve(undefined),
      );
      await expect(start([OrderListener], offReaders)).rejects.toThrow(
        "@OnQueueEvent('orders') on OrderListener.completed, OrderListener.failed, OrderListener.enqueued: queue events are off (module option queue.eventsMaxLen: 0)",
      );
    } finally {
      await off.close();
    }
  });

  it('checks its arguments when the class is defined, and records several registrations', () => {
    expect(() => OnQueueEvent('orders', 'finished' as never)).toThrow(QueueError);
    expect(() => OnQueueEvent('orders', 'finished' as never)).toThrow(
      `invalid argument 'type': expected an event type (one of ${QUEUE_EVENT_TYPES.join(', ')}) or a non-empty array of them, got 'finished'`,
    );
    expect(() => OnQueueEvent('orders', [])).toThrow(QueueError);
    expect(() => OnQueueEvent('orders', ['completed', 'nope' as never])).toThrow("got 'nope'");
    expect(() => OnQueueEvent('', 'completed')).toThrow(QueueError);
    expect(() => OnQueueEvent(42 as never, 'completed')).toThrow(QueueError);
    expect(Reflect.getMetadata(QUEUE_EVENT_METADATA, OrderListener.prototype.failed)).toEqual([
      { queue: 'mail', types: ['dead'] },
      { queue: 'orders', types: ['dead', 'cancelled'] },
    ]);
  });

  it("through RedisLockModule: a worker's completed task reaches the method with its result", async () => {
    app = await createLockApp({ keyPrefix: prefix }, [CompletedListener]);
    const queues = app.get(QueueService);
    queues.process('e2e', async (task) => ({ id: task.id, n: 42 }));
    // The method gets events from 'now': enqueue until one arrives (its reader has its position).
    let k = 0;
    await waitFor('the first completed event', async () => {
      if (seen('e2e').length > 0) return true;
      await queues.enqueue('e2e', `warm-${k++}`);
      return false;
    });
    await queues.enqueue('e2e', 'order-1');
    await waitFor('order-1 completed', () => seen('e2e').some((e) => e.taskId === 'order-1'));
    expect(seen('e2e').find((e) => e.taskId === 'order-1')).toMatchObject({
      queue: 'e2e',
      type: 'completed',
      attempt: 1,
      result: { id: 'order-1', n: 42 },
    });
  });
});
