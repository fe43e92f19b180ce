import 'reflect-metadata';
import { Controller, Get, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import request from 'supertest';
import {
  LockService,
  QueueError,
  QueueService,
  RedisLockHealthIndicator,
  RedisLockModule,
  RedisLockOptionsError,
  RedisUnavailableError,
  type RedisLockModuleOptions,
} from '../../lib';
import { RedisLockConnection } from '../../lib/redis/redis-connection';
import { createLockApp, testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';
import { freePort, startRedisServer, type RedisServer } from '../support/redis-server';

@Controller()
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly redisLock: RedisLockHealthIndicator,
  ) {}

  @Get('health')
  @HealthCheck()
  check() {
    return this.health.check([() => this.redisLock.isHealthy('redis', { timeoutMs: 300 })]);
  }

  @Get('health/queue')
  @HealthCheck()
  queue() {
    return this.health.check([
      () => this.redisLock.isHealthy('jobs', { queues: ['jobs'], minWorkers: 1, maxDead: 0 }),
    ]);
  }

  @Get('health/backlog')
  @HealthCheck()
  backlog() {
    return this.health.check([
      () => this.redisLock.isHealthy('backlog', { queues: ['backlog'], maxOldestReadyMs: 50 }),
    ]);
  }
}

async function httpApp(options: RedisLockModuleOptions): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [TerminusModule.forRoot({ logger: false }), RedisLockModule.forRoot(options)],
    controllers: [HealthController],
    providers: [RedisLockHealthIndicator],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  return app.init();
}

describe('RedisLockHealthIndicator over HTTP (@nestjs/terminus)', () => {
  let server: RedisServer;
  let app: INestApplication;

  beforeAll(async () => {
    server = await startRedisServer();
    app = await httpApp({
      redis: server.url,
      keyPrefix: uniquePrefix('health'),
      commandTimeoutMs: 300,
    });
  });
  afterAll(async () => {
    await app.close();
    await server.stop();
  });

  const status = async (path = '/health') => (await request(app.getHttpServer()).get(path)).status;

  it('answers 200 while Redis is up, 503 soon after it stops, 200 again after it is back', async () => {
    // The subscriber exists once a lock waited: then it is checked too.
    const locks = app.get(LockService);
    const held = await locks.acquire('h');
    await expect(locks.acquire('h', { waitMs: 50 })).rejects.toThrow();
    await held.release();
    const ok = await request(app.getHttpServer()).get('/health');
    expect(ok.status).toBe(200);
    expect(ok.body.info.redis).toEqual({ status: 'up', redis: 'up', subscriber: 'up' });

    await server.stop();
    const stopped = Date.now();
    await waitFor('503', async () => (await status()) === 503, 10_000, 50);
    expect(Date.now() - stopped).toBeLessThan(10_000);
    const down = await request(app.getHttpServer()).get('/health');
    expect(down.body.error.redis.status).toBe('down');
    expect(down.body.error.redis.message).toMatch(/^Redis unavailable: /);

    await server.restart();
    await waitFor('200 again', async () => (await status()) === 200, 15_000, 50);
  });

  it('is down when a queue has too few workers or too many dead tasks', async () => {
    expect(await status('/health/queue')).toBe(503);
    const queues = app.get(QueueService);
    const worker = queues.process(
      'jobs',
      () => {
        throw new Error('boom');
      },
      { maxAttempts: 1 },
    );
    expect(await status('/health/queue')).toBe(200);
    await queues.enqueue('jobs', 'j1');
    await waitFor('j1 to die', async () => (await queues.stats('jobs')).dead === 1);
    const res = await request(app.getHttpServer()).get('/health/queue');
    expect(res.status).toBe(503);
    expect(res.body.error.jobs.message).toBe('jobs: 1 dead > 0');
    await worker.close();
  });

  it('is down when a queue has a ready task due for longer than maxOldestReadyMs', async () => {
    expect(await status('/health/backlog')).toBe(200);
    const queues = app.get(QueueService);
    await queues.enqueue('backlog', 'waiting');
    // Nobody works the queue: the task is due from now on, and down once it waited 50 ms.
    await waitFor(
      'the backlog check to fail',
      async () => (await status('/health/backlog')) === 503,
    );
    const res = await request(app.getHttpServer()).get('/health/backlog');
    expect(res.body.error.backlog.message).toMatch(/^backlog: oldest ready \d+ ms > 50 ms$/);
    expect(res.body.error.backlog.queues.backlog).toMatchObject({ ready: 1, workers: 0 });
    await queues.remove('backlog', 'waiting');
    expect(await status('/health/backlog')).toBe(200);
  });
});

describe('RedisLockHealthIndicator in quorum mode, and with bad input', () => {
  it('is down when fewer than a majority of the quorum nodes answer', async () => {
    const servers = await Promise.all([startRedisServer(), startRedisServer(), startRedisServer()]);
    const app = await createLockApp({
      keyPrefix: uniquePrefix('health-quorum'),
      nodes: servers.map((s) => s.url),
      commandTimeoutMs: 300,
    });
    const health = new RedisLockHealthIndicator(
      app.get(RedisLockConnection),
      app.get(QueueService),
    );
    try {
      expect(await health.isHealthy('locks', { timeoutMs: 300 })).toEqual({
        locks: { status: 'up', redis: 'up', subscriber: expect.any(String), nodes: '3/3' },
      });
      await servers[1].stop();
      expect((await health.isHealthy('locks', { timeoutMs: 300 })).locks).toMatchObject({
        status: 'up',
        nodes: '2/3',
      });
      await servers[2].stop();
      expect((await health.isHealthy('locks', { timeoutMs: 300 })).locks).toMatchObject({
        status: 'down',
        nodes: '1/3',
        message: 'quorum: 1 of 3 nodes answer, locks need 2',
      });
    } finally {
      await app.close();
      await Promise.all(servers.map((s) => s.stop()));
    }
  });

  it('is down within timeoutMs when Redis answers PING but the queue checks hang', async () => {
    const app = await createLockApp({ keyPrefix: uniquePrefix('health-slow') });
    const queues = app.get(QueueService);
    const health = new RedisLockHealthIndicator(app.get(RedisLockConnection), queues);
    // A Redis slow to read queues (each call alone waits up to commandTimeoutMs, 5 s).
    const stats = jest.spyOn(queues, 'stats').mockReturnValue(new Promise(() => undefined));
    try {
      expect(await health.isHealthy('q', { timeoutMs: 200, queues: ['jobs'] })).toEqual({
        q: {
          status: 'down',
          message: 'Redis unavailable: Redis queue checks (health) failed: no answer within 200 ms',
        },
      });
    } finally {
      stats.mockRestore();
      await app.close();
    }
  });

  it("counts a queue's named handlers as the workers they are, as localWorkers does", async () => {
    const app = await createLockApp({ keyPrefix: uniquePrefix('health-named') });
    const queues = app.get(QueueService);
    const health = new RedisLockHealthIndicator(app.get(RedisLockConnection), queues);
    const handles = ['welcome', 'invoice', 'digest'].map((name) =>
      queues.process('mails', () => undefined, { name }),
    );
    try {
      expect(queues.localWorkers('mails')).toHaveLength(3);
      const result = await health.isHealthy('mails', { queues: ['mails'], minWorkers: 3 });
      expect(result.mails).toMatchObject({ status: 'up', queues: { mails: { workers: 3 } } });
    } finally {
      await Promise.all(handles.map((h) => h.close()));
      await app.close();
    }
  });

  it('refuses a bad queue name with a typed error instead of reporting Redis down', async () => {
    const app = await createLockApp({ keyPrefix: uniquePrefix('health-bad') });
    const health = new RedisLockHealthIndicator(
      app.get(RedisLockConnection),
      app.get(QueueService),
    );
    try {
      await expect(health.isHealthy('q', { queues: [''] })).rejects.toThrow(QueueError);
    } finally {
      await app.close();
    }
  });
});

describe('connectTimeoutMs (fail fast at bootstrap)', () => {
  it('refuses to start without Redis (RedisUnavailableError), starts with it', async () => {
    const port = await freePort();
    await expect(
      createLockApp({ redis: `redis://127.0.0.1:${port}`, connectTimeoutMs: 300 }),
    ).rejects.toBeInstanceOf(RedisUnavailableError);
    const app = await createLockApp({ connectTimeoutMs: 2_000 });
    await app.close();
    await expect(createLockApp({ connectTimeoutMs: 0 })).rejects.toThrow(RedisLockOptionsError);
  });

  it('refuses a database index Redis does not have (with connectTimeoutMs or not), starts with one it has', async () => {
    // ioredis logs the refused SELECT and goes on in database 0: the keys landed there.
    for (const connectTimeoutMs of [2_000, undefined]) {
      const err = await createLockApp({
        redis: `${testRedisUrl()}/99`,
        ...(connectTimeoutMs ? { connectTimeoutMs } : {}),
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect(err).toMatchObject({ option: 'redis', value: 99 });
    }
    const app = await createLockApp({ redis: `${testRedisUrl()}/3`, connectTimeoutMs: 2_000 });
    await app.close();
  });
});
