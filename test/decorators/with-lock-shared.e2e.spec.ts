import 'reflect-metadata';
import { Controller, Get, type INestApplication, Post, UseInterceptors } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { LockInterceptor, RedisLockModule, WithLock } from '../../lib';
import { deferred, testRedisUrl, uniquePrefix, waitFor, type Deferred } from '../support/helpers';

let readersInside = 0;
const gates: Deferred<void>[] = [];

@Controller('prices')
@UseInterceptors(LockInterceptor)
class PricesController {
  @Get()
  @WithLock('prices', { mode: 'shared', ttlMs: 5_000 })
  async read(): Promise<string> {
    readersInside++;
    const gate = deferred();
    gates.push(gate);
    await gate.promise;
    readersInside--;
    return 'price list';
  }

  @WithLock('prices', { ttlMs: 5_000 })
  @Post('rebuild')
  async rebuild(): Promise<string> {
    return 'rebuilt';
  }
}

describe("@WithLock({ mode: 'shared' }) over HTTP", () => {
  let app: INestApplication;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: uniquePrefix('rwh') })],
      controllers: [PricesController],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(() => app.close());

  it('readers run together; a writer meanwhile gets 423; after them it gets in', async () => {
    const server = app.getHttpServer();
    const readers = [1, 2, 3].map(() =>
      request(server)
        .get('/prices')
        .then((r) => r),
    );
    await waitFor('3 readers inside at once', () => readersInside === 3);
    const busy = await request(server).post('/prices/rebuild');
    expect(busy.status).toBe(423);
    expect(busy.body).toMatchObject({ statusCode: 423, error: 'Locked', key: 'prices' });
    for (const gate of gates.splice(0)) gate.resolve();
    for (const r of await Promise.all(readers)) expect(r.text).toBe('price list');
    const rebuilt = await request(server).post('/prices/rebuild');
    expect(rebuilt.status).toBe(201);
    expect(rebuilt.text).toBe('rebuilt');
  });
});
