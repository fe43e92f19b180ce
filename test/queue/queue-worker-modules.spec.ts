import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import { QueueWorker, RedisLockModule } from '../../lib';
import { sleep, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

describe('@QueueWorker with RedisLockModule imported in several modules', () => {
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

  const blockedClients = async () =>
    Number(/blocked_clients:(\d+)/.exec(await redis.info('clients'))![1]);

  it('starts each worker once, by the RedisLockModule its provider module imports', async () => {
    const prefix = uniquePrefix('worker-modules');
    @Injectable()
    class OrdersWorker {
      @QueueWorker('orders')
      async handle(): Promise<void> {}
    }
    @Module({
      imports: [RedisLockModule.forRoot({ redis: server.url, keyPrefix: prefix })],
      providers: [OrdersWorker],
    })
    class OrdersModule {}
    @Module({ imports: [RedisLockModule.forRoot({ redis: server.url, keyPrefix: prefix })] })
    class BillingModule {}

    const app = await (
      await Test.createTestingModule({ imports: [OrdersModule, BillingModule] }).compile()
    ).init();
    try {
      await waitFor('the idle worker to block', async () => (await blockedClients()) >= 1);
      // Watch a while: a second worker (the other module's) would block within a round trip or two.
      for (let i = 0; i < 20; i++) {
        expect(await blockedClients()).toBe(1);
        await sleep(10);
      }
    } finally {
      await app.close();
    }
    await waitFor('the worker to stop', async () => (await blockedClients()) === 0);
  });
});
