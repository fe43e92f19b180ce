import 'reflect-metadata';
import {
  Controller,
  type INestApplication,
  Param,
  Post,
  UseInterceptors,
  HttpCode,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { LockInterceptor, RedisLockModule, WithSemaphore } from '../../lib';
import { deferred, testRedisUrl, uniquePrefix, waitFor, type Deferred } from '../support/helpers';

/** Calls in progress and the gate each one waits on, by provider. */
const inside = new Map<string, number>();
const gates: Deferred<void>[] = [];

async function call(provider: string): Promise<string> {
  inside.set(provider, (inside.get(provider) ?? 0) + 1);
  const gate = deferred();
  gates.push(gate);
  await gate.promise;
  inside.set(provider, inside.get(provider)! - 1);
  return `charged via ${provider}`;
}

@Controller('providers')
@UseInterceptors(LockInterceptor)
class PaymentController {
  // Route decorators above @WithSemaphore…
  @Post(':provider/charge')
  @HttpCode(201)
  @WithSemaphore('provider:<0>', { limit: 2, ttlMs: 5_000 })
  charge(@Param('provider') provider: string): Promise<string> {
    return call(provider);
  }

  // …and below it.
  @WithSemaphore('provider:<0>', { limit: 2, ttlMs: 5_000 })
  @Post(':provider/refund')
  refund(@Param('provider') provider: string): Promise<string> {
    return call(provider);
  }
}

describe('@WithSemaphore over HTTP', () => {
  let app: INestApplication;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: uniquePrefix('ws') })],
      controllers: [PaymentController],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(() => app.close());

  it('lets limit requests in at once (either decorator order); the next one gets 423 naming the key', async () => {
    const server = app.getHttpServer();
    const first = request(server)
      .post('/providers/acme/charge')
      .then((r) => r);
    const second = request(server)
      .post('/providers/acme/refund')
      .then((r) => r);
    await waitFor('two calls inside', () => inside.get('acme') === 2);
    const third = await request(server).post('/providers/acme/charge');
    expect(third.status).toBe(423);
    expect(third.headers['retry-after']).toMatch(/^\d+$/);
    expect(third.body).toMatchObject({ statusCode: 423, error: 'Locked', key: 'provider:acme' });
    expect(third.body.message).toMatch(/semaphore 'provider:acme': 1 of 2 permits/);
    // Another provider has permits of its own.
    const other = request(server)
      .post('/providers/other/charge')
      .then((r) => r);
    await waitFor('a call of the other provider inside', () => inside.get('other') === 1);
    for (const gate of gates.splice(0)) gate.resolve();
    expect((await first).status).toBe(201);
    expect((await second).text).toBe('charged via acme');
    expect((await other).status).toBe(201);
    // Released: a new call gets in.
    const again = request(server)
      .post('/providers/acme/charge')
      .then((r) => r);
    await waitFor('a call inside again', () => inside.get('acme') === 1);
    gates.splice(0).forEach((g) => g.resolve());
    expect((await again).status).toBe(201);
  });
});

describe('@WithSemaphore options', () => {
  it.each([
    [{ limit: 0 }, 'limit'],
    [{ limit: 2, permits: 3 }, 'permits'],
    [{ limit: 2.5 }, 'limit'],
  ])('rejects %j when the class is defined, naming the option', (options, option) => {
    expect(() => WithSemaphore('p:<0>', options)).toThrow(
      expect.objectContaining({ name: 'RedisLockOptionsError', option }),
    );
  });
});
