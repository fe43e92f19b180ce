import 'reflect-metadata';
import { Controller, Module, Post, UseInterceptors, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import request from 'supertest';
import {
  LockInterceptor,
  QueueFullError,
  QueueService,
  RedisLockModule,
  RedisLockOptionsError,
} from '../../lib';
import { exited, lineFrom, spawnTs } from '../support/child';
import { createLockApp, redisClient, testRedisUrl, uniquePrefix } from '../support/helpers';

describe('QueueService bounded queues (maxSize)', () => {
  const prefix = uniquePrefix('queue-max-size');
  let app: Awaited<ReturnType<typeof createLockApp>>;
  let queues: QueueService;
  let redis: Redis;
  let n = 0;
  const fresh = () => `bounded-${++n}`;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix, queue: { maxSize: 5 } });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  const full = async (call: Promise<unknown>) => {
    const err = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(QueueFullError);
    return err as QueueFullError;
  };

  it('refuses past the module bound with QueueFullError naming queue, size and maxSize; all or nothing', async () => {
    const q = fresh();
    expect(await queues.enqueue(q, ['a', 'b', 'c'])).toBe(3);
    const err = await full(queues.enqueue(q, ['d', 'e', 'f']));
    expect(err).toMatchObject({ queue: q, size: 3, maxSize: 5 });
    expect(err.message).toContain(`queue '${q}' is full`);
    expect((await queues.stats(q)).ready).toBe(3);
    expect(await queues.enqueue(q, ['d', 'e'])).toBe(2);
    await full(queues.enqueue(q, 'f'));
    // An id already queued is no new task: not refused, not added.
    expect(await queues.enqueue(q, 'a')).toBe(0);
  });

  it('counts an id given twice in one call as the one task it adds', async () => {
    const q = fresh();
    expect(await queues.enqueue(q, ['a', 'b', 'c'])).toBe(3);
    // 3 queued + 2 new ids = 5, the bound: it fits.
    expect(await queues.enqueue(q, ['x', 'y', 'x', 'y', 'x'])).toBe(2);
    expect((await queues.stats(q)).ready).toBe(5);
    await full(queues.enqueue(q, ['z', 'z']));
  });

  it('counts leased tasks, not finished ones: room comes back when tasks complete', async () => {
    const q = fresh();
    await queues.enqueue(q, [1, 2, 3, 4, 5]);
    const leased = await queues.claim(q, 2);
    await full(queues.enqueue(q, 6));
    for (const t of leased) await queues.ack(t, { ok: true });
    // Completed tasks are kept (keepCompleted) but hold no room.
    expect((await queues.stats(q)).completed).toBe(2);
    expect(await queues.enqueue(q, [6, 7])).toBe(2);
    await full(queues.enqueue(q, 8));
  });

  it('setMaxSize bounds one queue for every instance; null falls back to the module bound', async () => {
    const q = fresh();
    await queues.setMaxSize(q, 2);
    await queues.enqueue(q, ['x', 'y']);
    expect(await full(queues.enqueue(q, 'z'))).toMatchObject({ size: 2, maxSize: 2 });
    await queues.setMaxSize(q, 10);
    expect(await queues.enqueue(q, ['z', 'w'])).toBe(2);
    await queues.setMaxSize(q, null);
    expect(await queues.enqueue(q, 'v')).toBe(1);
    expect(await full(queues.enqueue(q, 'u'))).toMatchObject({ size: 5, maxSize: 5 });
  });

  it('rejects a bound that is not an integer from 1 with RedisLockOptionsError', async () => {
    for (const bad of [0, -1, 1.5, '3', NaN]) {
      await expect(queues.setMaxSize('x', bad as number)).rejects.toBeInstanceOf(
        RedisLockOptionsError,
      );
    }
    await expect(createLockApp({ keyPrefix: prefix, queue: { maxSize: 0 } })).rejects.toThrow(
      RedisLockOptionsError,
    );
  });

  it('8 producers in 4 processes racing for a bound of 100: exactly 100 added, every other call refused', async () => {
    const q = fresh();
    await queues.setMaxSize(q, 100);
    const children = Array.from({ length: 4 }, () =>
      spawnTs('test/fixtures/queue-producer-child.ts', [], {
        REDIS_URL: testRedisUrl(),
        PREFIX: prefix,
        QUEUE: q,
        PRODUCERS: '2',
        COUNT: '60',
      }),
    );
    await Promise.all(children.map((c) => lineFrom(c, /^ready$/, 60_000)));
    const results = children.map((c) => lineFrom(c, /^result /, 60_000));
    await redis.rpush(`${prefix}go`, 'go', 'go', 'go', 'go');
    const lines = await Promise.all(results);
    await Promise.all(children.map((c) => exited(c)));
    const totals = lines.map((l) => l.split(' ').slice(1).map(Number));
    const added = totals.reduce((s, t) => s + t[0], 0);
    const refused = totals.reduce((s, t) => s + t[1], 0);
    const other = totals.reduce((s, t) => s + t[2], 0);
    expect(other).toBe(0);
    expect(added).toBe(100);
    expect(refused).toBe(4 * 2 * 60 - 100);
    expect((await queues.stats(q)).ready).toBe(100);
  }, 120_000);
});

describe('QueueFullError over HTTP (LockInterceptor)', () => {
  const prefix = uniquePrefix('queue-max-size-http');
  let app: INestApplication;

  @Controller('orders')
  @UseInterceptors(LockInterceptor)
  class OrdersController {
    private n = 0;
    constructor(private readonly queues: QueueService) {}
    @Post()
    async create() {
      await this.queues.enqueue('http-orders', `o-${++this.n}`);
      return { queued: this.n };
    }
  }

  @Module({
    imports: [
      RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefix, queue: { maxSize: 2 } }),
    ],
    controllers: [OrdersController],
  })
  class HttpModule {}

  beforeAll(async () => {
    const ref = await Test.createTestingModule({ imports: [HttpModule] }).compile();
    app = ref.createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(() => app.close());

  it('answers 503 with Retry-After and names the queue', async () => {
    const http = () => request(app.getHttpServer()).post('/orders');
    expect((await http()).status).toBe(201);
    expect((await http()).status).toBe(201);
    const res = await http();
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.body).toEqual({
      statusCode: 503,
      error: 'Service Unavailable',
      message: "queue 'http-orders' is full; try again later",
      queue: 'http-orders',
    });
  });
});
