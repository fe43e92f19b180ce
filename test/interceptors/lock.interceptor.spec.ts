import 'reflect-metadata';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  BadRequestException,
  Body,
  Controller,
  Get,
  Injectable,
  type INestApplication,
  Param,
  Post,
  Query,
  UseInterceptors,
  type LoggerService,
  type CallHandler,
  type ExecutionContext,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { lastValueFrom, Observable, Subject, throwError } from 'rxjs';
import request from 'supertest';
import {
  LockInterceptor,
  LockKeyError,
  LockKeyValueMissingError,
  LockService,
  LockQuorumError,
  LockTimeoutError,
  RedisLockModule,
  RedisUnavailableError,
  WithLock,
} from '../../lib';
import { testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer } from '../support/redis-server';

interface BuyDto {
  qty: number;
}

@Injectable()
class OrderService {
  @WithLock('order:<0>')
  async place(id: string): Promise<string> {
    return `placed ${id}`;
  }
}

/** Streams the handlers return, by id, and which handlers are running. */
const feeds = new Map<string, Subject<string>>();
const running = new Set<string>();

@Controller('stock')
@UseInterceptors(LockInterceptor)
class StockController {
  constructor(private readonly orders: OrderService) {}

  @Post(':sku/buy')
  @WithLock('stock:<0>', { waitMs: 200, ttlMs: 5_000 })
  async buy(@Param('sku') sku: string, @Body() dto: BuyDto): Promise<string> {
    return `bought ${dto.qty} of ${sku}`;
  }

  @Post('orders/:id')
  order(@Param('id') id: string): Promise<string> {
    return this.orders.place(id);
  }

  @Get('outage/:kind')
  outage(@Param('kind') kind: string): never {
    throw kind === 'quorum'
      ? new LockQuorumError(['stock:x'], 'acquire', 3, 1, 1, 2, 100)
      : new RedisUnavailableError('lock acquire', 'no answer within 5000 ms');
  }

  @Get('bad')
  bad(): never {
    throw new BadRequestException('no such thing');
  }

  @Get('broken')
  @WithLock('broken')
  async broken(): Promise<never> {
    throw new Error('broken handler');
  }

  @Get('feed/:id')
  @WithLock('feed:<0>')
  feed(@Param('id') id: string): Observable<string> {
    running.add(`feed:${id}`);
    return feeds.get(id)!.asObservable();
  }

  @Get('later/:id')
  @WithLock('later:<0>')
  async later(@Param('id') id: string): Promise<Observable<string>> {
    running.add(`later:${id}`);
    return feeds.get(id)!.asObservable();
  }
}

interface PaymentDto {
  orderId?: string;
  amount: number;
}

/** How many times each payment handler ran (a handler must not run without its key). */
const paid = new Map<string, number>();
const ran = (what: string) => paid.set(what, (paid.get(what) ?? 0) + 1);

@Injectable()
class PaymentService {
  @WithLock('charge:<0.orderId>')
  async charge(payment: PaymentDto): Promise<string> {
    ran('charge');
    return `charged ${payment.orderId}`;
  }
}

@Controller('payments')
@UseInterceptors(LockInterceptor)
class PaymentController {
  constructor(private readonly payments: PaymentService) {}

  @Post()
  @WithLock('payment:<0.orderId>')
  async pay(@Body() body: PaymentDto): Promise<string> {
    ran('pay');
    return `paid ${body.orderId}`;
  }

  @Get('status')
  @WithLock('payment:<0>')
  async status(@Query('id') id: string): Promise<string> {
    ran('status');
    return `status ${id}`;
  }

  @Post('charge')
  charge(@Body() body: PaymentDto): Promise<string> {
    return this.payments.charge(body);
  }

  // A programming error: the template names the whole body, which is never a scalar.
  @Post('whole-body')
  @WithLock('payment:<0>')
  async wholeBody(@Body() _body: PaymentDto): Promise<string> {
    ran('whole-body');
    return 'unreachable';
  }
}

@Controller('bare')
class BareController {
  @Post(':sku')
  @WithLock('stock:<0>')
  async buy(@Param('sku') sku: string): Promise<string> {
    return sku;
  }
}

/** A 503 of a lock acquisition without Redis: Retry-After 1 and the operation, nothing more. */
function expectRedisUnavailable(res: request.Response): void {
  expect(res.status).toBe(503);
  expect(res.headers['retry-after']).toBe('1');
  expect(res.body).toEqual({
    statusCode: 503,
    error: 'Service Unavailable',
    message: 'Redis unavailable (lock acquire)',
  });
}

describe('LockInterceptor', () => {
  const prefix = uniquePrefix('interceptor');
  let app: INestApplication;
  let locks: LockService;
  const http = () => request(app.getHttpServer());

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefix })],
      controllers: [StockController, BareController, PaymentController],
      providers: [OrderService, PaymentService],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    locks = app.get(LockService);
  });
  afterAll(() => app.close());

  describe('contention over HTTP', () => {
    it('answers 423 Locked with Retry-After and a JSON body while the key is held; 2xx after release', async () => {
      const held = await locks.acquire('stock:sku-1', { ttlMs: 10_000 });
      const res = await http().post('/stock/sku-1/buy').send({ qty: 1 });
      expect(res.status).toBe(423);
      expect(res.headers['retry-after']).toMatch(/^\d+$/);
      const retryAfter = Number(res.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(10);
      // Whole seconds rounded up from the holder's remaining TTL.
      expect(retryAfter * 1000).toBeGreaterThanOrEqual(held.expiresAt - Date.now());
      expect(res.body).toEqual({
        statusCode: 423,
        error: 'Locked',
        message: expect.stringMatching(
          /^lock 'stock:sku-1' not acquired within \d+ ms; held by another owner for \d+ ms more$/,
        ),
        key: 'stock:sku-1',
      });
      await held.release();
      const after = await http().post('/stock/sku-1/buy').send({ qty: 2 });
      expect(after.status).toBe(201);
      expect(after.text).toBe('bought 2 of sku-1');
    });

    it('Retry-After estimates the wait from the line and recent hold times, not the holder TTL', async () => {
      // A few quick sections: this instance has seen how long the lock is held.
      for (let i = 0; i < 3; i++)
        expect((await http().post('/stock/sku-7/buy').send({})).status).toBe(201);
      const held = await locks.acquire('stock:sku-7', { ttlMs: 20_000 });
      const res = await http().post('/stock/sku-7/buy').send({});
      expect(res.status).toBe(423);
      // Held for 20 s more, but sections take milliseconds here: retry in a second, not 20.
      expect(res.headers['retry-after']).toBe('1');
      await held.release();
    });

    it('maps a LockTimeoutError from a decorated service the handler calls', async () => {
      const held = await locks.acquire('order:9', { ttlMs: 3_000 });
      const res = await http().post('/stock/orders/9');
      expect(res.status).toBe(423);
      expect(res.body.key).toBe('order:9');
      expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(3);
      await held.release();
      expect((await http().post('/stock/orders/9')).text).toBe('placed 9');
    });

    it.each(['redis', 'quorum'])(
      'answers 503 with Retry-After when the lock store is out of reach (%s)',
      async (kind) => {
        // The operation only: node counts and client wording stay in the log.
        expectRedisUnavailable(await http().get(`/stock/outage/${kind}`));
      },
    );

    it('leaves other errors alone', async () => {
      const bad = await http().get('/stock/bad');
      expect(bad.status).toBe(400);
      expect(bad.body.message).toBe('no such thing');
      const broken = await http().get('/stock/broken');
      expect(broken.status).toBe(500);
      expect(broken.headers['retry-after']).toBeUndefined();
    });

    it('without the interceptor, contention is a plain server error', async () => {
      const held = await locks.acquire('stock:bare', { ttlMs: 3_000 });
      const res = await http().post('/bare/bare');
      expect(res.status).toBe(500);
      await held.release();
    });
  });

  describe('a lock key value missing from the request', () => {
    beforeEach(() => paid.clear());

    it('answers 400 naming the missing body field; the handler does not run', async () => {
      const res = await http().post('/payments').send({ amount: 7 });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        statusCode: 400,
        error: 'Bad Request',
        message: "body.orderId is missing; the key 'payment:<0.orderId>' needs it",
        missing: 'body.orderId',
      });
      const ok = await http().post('/payments').send({ orderId: 'o-1', amount: 7 });
      expect(ok.status).toBe(201);
      expect(ok.text).toBe('paid o-1');
      expect(paid.get('pay')).toBe(1);
    });

    it.each([
      ['absent', '/payments/status', 'query.id is missing'],
      ['empty', '/payments/status?id=', 'query.id is empty'],
    ])('answers 400 for an %s query parameter', async (_what, url, message) => {
      const res = await http().get(url);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        statusCode: 400,
        error: 'Bad Request',
        message: `${message}; the key 'payment:<0>' needs it`,
        missing: 'query.id',
      });
      expect(paid.get('status')).toBeUndefined();
    });

    it("answers 400 naming the placeholder when a service's key misses a value", async () => {
      const res = await http().post('/payments/charge').send({ amount: 7 });
      expect(res.status).toBe(400);
      expect(res.body.missing).toBe('<0.orderId>');
      expect(res.body.message).toBe(
        "<0.orderId> is missing; the key 'charge:<0.orderId>' needs it",
      );
      expect(paid.get('charge')).toBeUndefined();
    });

    it.each([
      [
        'too long for a key',
        { orderId: 'é'.repeat(254), amount: 7 },
        "body.orderId makes the key 516 bytes long; the limit is 512; the key 'payment:<0.orderId>' is built from it",
      ],
      [
        'not well-formed Unicode',
        '{"orderId":"o-\\ud800","amount":7}',
        "body.orderId is not well-formed Unicode (a lone surrogate); the key 'payment:<0.orderId>' is built from it",
      ],
    ])('answers 400 for a value %s; the handler does not run', async (_what, body, message) => {
      const res = await http()
        .post('/payments')
        .set('Content-Type', 'application/json')
        .send(typeof body === 'string' ? body : JSON.stringify(body));
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        statusCode: 400,
        error: 'Bad Request',
        message,
        invalid: 'body.orderId',
      });
      expect(paid.get('pay')).toBeUndefined();
    });

    it('keeps a 500 for a template that can never be filled (a programming error)', async () => {
      const res = await http().post('/payments/whole-body').send({ orderId: 'o-2', amount: 7 });
      expect(res.status).toBe(500);
      expect(paid.get('whole-body')).toBeUndefined();
    });

    it('a service still gets LockKeyValueMissingError, a LockKeyError naming method and value', async () => {
      const err = await app
        .get(PaymentService)
        .charge({ amount: 7 })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockKeyValueMissingError);
      expect(err).toBeInstanceOf(LockKeyError);
      expect(err).toMatchObject({
        name: 'LockKeyValueMissingError',
        template: 'charge:<0.orderId>',
        placeholder: '<0.orderId>',
        argument: 0,
        path: ['orderId'],
        method: 'PaymentService.charge',
        message:
          "@WithLock on PaymentService.charge: key template 'charge:<0.orderId>': " +
          '<0.orderId> is undefined; expected a non-empty string, a finite number, a bigint or a boolean',
      });
    });
  });

  describe('Observable handlers', () => {
    it.each([
      ['an Observable', 'feed'],
      ['a Promise of an Observable (flattened)', 'later'],
    ])('a handler returning %s holds the lock until the stream completes', async (_what, route) => {
      const subject = new Subject<string>();
      feeds.set(route, subject);
      const response = http()
        .get(`/stock/${route}/${route}`)
        .then((res) => res);
      await waitFor('the handler to run', () => running.has(`${route}:${route}`));
      expect(await locks.isLocked(`${route}:${route}`)).toBe(true);
      subject.next('first');
      subject.next('last');
      expect(await locks.isLocked(`${route}:${route}`)).toBe(true);
      subject.complete();
      const res = await response;
      expect(res.status).toBe(200);
      expect(res.text).toBe('last');
      expect(await locks.isLocked(`${route}:${route}`)).toBe(false);
    });

    it('releases the lock when the client goes away (the stream is unsubscribed)', async () => {
      feeds.set('gone', new Subject<string>());
      const { port } = app.getHttpServer().address() as AddressInfo;
      const req = httpRequest({ port, host: '127.0.0.1', path: '/stock/feed/gone' });
      req.on('error', () => undefined);
      req.end();
      await waitFor('the handler to run', () => running.has('feed:gone'));
      expect(await locks.isLocked('feed:gone')).toBe(true);
      req.destroy();
      await waitFor('the lock to be released', async () => !(await locks.isLocked('feed:gone')));
    });
  });

  describe('outside HTTP', () => {
    it('passes LockTimeoutError through unchanged in rpc and ws contexts', async () => {
      const interceptor = new LockInterceptor();
      const error = new LockTimeoutError(['k'], 0, 1_000);
      for (const type of ['rpc', 'ws']) {
        const context = { getType: () => type } as unknown as ExecutionContext;
        const next: CallHandler = { handle: () => throwError(() => error) };
        await expect(lastValueFrom(interceptor.intercept(context, next))).rejects.toBe(error);
      }
    });
  });
});

describe('LockInterceptor registered globally (APP_INTERCEPTOR)', () => {
  it('answers 423 for every controller', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: uniquePrefix('global') }),
      ],
      controllers: [BareController],
      providers: [{ provide: APP_INTERCEPTOR, useClass: LockInterceptor }],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    try {
      const held = await app.get(LockService).acquire('stock:g', { ttlMs: 2_000 });
      const res = await request(app.getHttpServer()).post('/bare/g');
      expect(res.status).toBe(423);
      expect(res.headers['retry-after']).toMatch(/^[12]$/);
      await held.release();
      expect((await request(app.getHttpServer()).post('/bare/g')).status).toBe(201);
    } finally {
      await app.close();
    }
  });
});

describe('LockInterceptor when Redis is down', () => {
  it('answers 503 "Redis unavailable" without client internals; the detail is logged once', async () => {
    const server = await startRedisServer();
    const warnings: string[] = [];
    const logger: LoggerService = {
      log: () => undefined,
      error: () => undefined,
      warn: (message: unknown, context?: unknown) => {
        if (context === 'LockInterceptor') warnings.push(String(message));
      },
    };
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedisLockModule.forRoot({
          redis: server.url,
          keyPrefix: uniquePrefix('interceptor-down'),
          commandTimeoutMs: 300,
        }),
      ],
      controllers: [StockController],
      providers: [OrderService],
    }).compile();
    const app = moduleRef.createNestApplication({ logger });
    await app.init();
    try {
      const buy = () => request(app.getHttpServer()).post('/stock/down/buy').send({ qty: 1 });
      expect((await buy()).status).toBe(201);
      await server.stop();
      // Three at once: one warning per throttle interval (5 s), not one per request.
      const answers = await Promise.all([buy(), buy(), buy()]);
      for (const res of answers) expectRedisUnavailable(res);
      expect(warnings).toEqual([
        expect.stringMatching(
          /^POST \/stock\/down\/buy answered 503: Redis lock acquire failed: \S/,
        ),
      ]);
      // Back up before closing, so that the shutdown releases and quits normally.
      await server.restart();
    } finally {
      await app.close();
      await server.stop();
    }
  });
});
