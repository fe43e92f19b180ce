import 'reflect-metadata';
import { Body, Controller, Injectable, type INestApplication, Param, Post } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { Observable, of } from 'rxjs';
import request from 'supertest';
import {
  LockInterceptor,
  LockKeyValueMissingError,
  LockService,
  RateLimit,
  RateLimitedError,
  RedisLockError,
  RedisLockModule,
  WithLock,
} from '../../lib';
import { testRedisUrl, uniquePrefix } from '../support/helpers';

@Injectable()
class Mailer {
  sent = 0;

  @RateLimit((to: string) => `mail:${to}`, {
    limit: 2,
    windowMs: 60_000,
    algorithm: 'token-bucket',
  })
  async send(to: string): Promise<string> {
    this.sent++;
    return `sent to ${to}`;
  }

  @RateLimit('feed:<0>', { limit: 1, windowMs: 60_000 })
  feed(user: string): Observable<string> {
    return of(`feed of ${user}`);
  }
}

@Controller('sales')
class SalesController {
  bought = 0;

  @Post(':sku/buy')
  @RateLimit('buy:<1.userId>', { limit: 3, windowMs: 60_000 })
  @WithLock('stock:<0>', { waitMs: 0 })
  async buy(@Param('sku') sku: string, @Body() body: { userId: string }) {
    this.bought++;
    return { sku, userId: body.userId };
  }
}

describe('@RateLimit', () => {
  const prefix = uniquePrefix('rate-decorator');
  let app: INestApplication;

  beforeAll(async () => {
    const ref = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefix })],
      controllers: [SalesController],
      providers: [Mailer, { provide: APP_INTERCEPTOR, useClass: LockInterceptor }],
    }).compile();
    app = ref.createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(() => app.close());

  it('answers 429 with Retry-After over the limit, and the handler does not run', async () => {
    const server = app.getHttpServer();
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await request(server).post('/sales/phone/buy').send({ userId: 'ann' });
      statuses.push(r.status);
      if (r.status === 429) {
        expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(59);
        expect(Number(r.headers['retry-after'])).toBeLessThanOrEqual(60);
        expect(r.body).toMatchObject({
          statusCode: 429,
          error: 'Too Many Requests',
          key: 'buy:ann',
        });
        expect(r.body.retryAfterMs).toBeGreaterThan(58_000);
      }
    }
    expect(statuses).toEqual([201, 201, 201, 429]);
    expect(app.get(SalesController).bought).toBe(3);
    // Another buyer has a limit of his own.
    await request(server).post('/sales/phone/buy').send({ userId: 'bob' }).expect(201);
  });

  it('is checked before the lock: a refused call never waits for it', async () => {
    const server = app.getHttpServer();
    const holder = await app.get(LockService).acquire('stock:lamp', { ttlMs: 30_000 });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) {
        statuses.push(
          (await request(server).post('/sales/lamp/buy').send({ userId: 'cy' })).status,
        );
      }
      // Three calls within the limit meet the held lock (423); the fourth is over the limit.
      expect(statuses).toEqual([423, 423, 423, 429]);
    } finally {
      await holder.release();
    }
  });

  it('rejects with RateLimitedError in a provider, and counts an Observable on subscription', async () => {
    const mailer = app.get(Mailer);
    await mailer.send('x@example.com');
    await mailer.send('x@example.com');
    const err = await mailer.send('x@example.com').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    expect(err).toMatchObject({ key: 'mail:x@example.com', limit: 2, windowMs: 60_000 });
    expect(mailer.sent).toBe(2);

    const feed = mailer.feed('dan'); // not counted yet
    await expect(
      new Promise((resolve, reject) => feed.subscribe({ next: resolve, error: reject })),
    ).resolves.toBe('feed of dan');
    await expect(
      new Promise((resolve, reject) => feed.subscribe({ next: resolve, error: reject })),
    ).rejects.toBeInstanceOf(RateLimitedError);
  });

  it('answers 400 for a key value missing from the request; the error names @RateLimit, not @WithLock', async () => {
    const res = await request(app.getHttpServer()).post('/sales/phone/buy').send({}).expect(400);
    expect(res.body).toEqual({
      statusCode: 400,
      error: 'Bad Request',
      message: "body.userId is missing; the key 'buy:<1.userId>' needs it",
      missing: 'body.userId',
    });
    const err = await app
      .get(SalesController)
      .buy('phone', {} as { userId: string })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockKeyValueMissingError);
    expect((err as Error).message).toMatch(/^@RateLimit on SalesController\.buy: key template/);
  });

  it('refuses, when the class is defined, @WithLock written above it (the limit must come first)', () => {
    expect(() => {
      class Wrong {
        @WithLock('stock:<0>')
        @RateLimit('buy:<0>', { limit: 1, windowMs: 1_000 })
        async buy(_sku: string) {}
      }
      return Wrong;
    }).toThrow(
      new RedisLockError(
        '@WithLock on Wrong.buy: write @RateLimit above @WithLock, so that the limit is checked before anything is taken (decorators below run first)',
      ),
    );
  });

  it('checks its template and options when the class is defined', () => {
    expect(() => {
      class BadTemplate {
        @RateLimit('buy:<0', { limit: 1, windowMs: 1_000 })
        async buy(_sku: string) {}
      }
      return BadTemplate;
    }).toThrow(RedisLockError);
    expect(() => RateLimit('buy', { limit: 0, windowMs: 1_000 })).toThrow(/limit/);
  });
});
