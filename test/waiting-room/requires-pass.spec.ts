import 'reflect-metadata';
import { Body, Controller, type INestApplication, Post } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import {
  LockInterceptor,
  PassRequiredError,
  RedisLockError,
  RedisLockModule,
  RequiresPass,
  WaitingRoomService,
} from '../../lib';
import { testRedisUrl, uniquePrefix } from '../support/helpers';

@Controller('sale')
class SaleController {
  bought = 0;

  @Post('buy')
  @RequiresPass('sale', '<0.userId>')
  async buy(@Body() body: { userId: string }) {
    this.bought++;
    return { bought: body.userId };
  }
}

describe('@RequiresPass', () => {
  const prefix = uniquePrefix('room-pass');
  let app: INestApplication;

  beforeAll(async () => {
    const ref = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefix })],
      controllers: [SaleController],
      providers: [{ provide: APP_INTERCEPTOR, useClass: LockInterceptor }],
    }).compile();
    app = ref.createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(() => app.close());

  it('answers 403 naming the room to a visitor without a pass, and the handler does not run; 201 with one', async () => {
    const rooms = app.get(WaitingRoomService);
    const controller = app.get(SaleController);
    await rooms.open('sale', { admitPerSecond: 0, passTtlMs: 60_000 });
    await rooms.join('sale', 'ann');
    const refused = await request(app.getHttpServer()).post('/sale/buy').send({ userId: 'ann' });
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({
      statusCode: 403,
      error: 'Forbidden',
      room: 'sale',
      message:
        "visitor 'ann' has no pass of waiting room 'sale': join the room and wait for its turn (or its pass expired)",
    });
    expect(controller.bought).toBe(0);
    await rooms.open('sale', { admitPerSecond: 10, passTtlMs: 60_000 });
    await rooms.wait('sale', 'ann', { waitMs: 5_000 });
    const served = await request(app.getHttpServer()).post('/sale/buy').send({ userId: 'ann' });
    expect(served.status).toBe(201);
    expect(served.body).toEqual({ bought: 'ann' });
    expect(controller.bought).toBe(1);
  });

  it('rejects with PassRequiredError outside HTTP, and refuses a template naming a missing argument at definition', async () => {
    const controller = app.get(SaleController);
    const err = await controller.buy({ userId: 'bob' }).catch((e) => e);
    expect(err).toBeInstanceOf(PassRequiredError);
    expect(err).toMatchObject({ room: 'sale', visitorId: 'bob' });
    expect(() => {
      class Bad {
        @RequiresPass('sale', '<1>')
        go(_a: string) {
          return _a;
        }
      }
      return Bad;
    }).toThrow(/@RequiresPass on Bad.go: key template '<1>' names argument 1/);
    expect(() => RequiresPass('', '<0>')).toThrow(RedisLockError);
  });
});
