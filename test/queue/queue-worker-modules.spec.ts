import 'reflect-metadata';
import { Injectable, Logger, Module, Scope } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import { OnQueueEvent, QueueService, QueueWorker, RedisLockModule } from '../../lib';
import { blockedClients, redisClient, sleep, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

describe('@QueueWorker with RedisLockModule imported in several modules', () => {
  let server: RedisServer;
  let redis: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    redis = redisClient(server.url);
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

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

    // Every worker, whichever module's QueueService starts it, goes through process().
    const started = jest.spyOn(QueueService.prototype, 'process');
    try {
      const app = await (
        await Test.createTestingModule({ imports: [OrdersModule, BillingModule] }).compile()
      ).init();
      try {
        expect(started).toHaveBeenCalledTimes(1);
        expect(started.mock.calls[0][0]).toBe('orders');
        await waitFor('the idle worker to block', async () => (await blockedClients(redis)) >= 1);
        // Watch a while: a second worker (the other module's) would block within a round trip or two.
        for (let i = 0; i < 20; i++) {
          expect(await blockedClients(redis)).toBe(1);
          await sleep(10);
        }
      } finally {
        await app.close();
      }
    } finally {
      started.mockRestore();
    }
    await waitFor('the worker to stop', async () => (await blockedClients(redis)) === 0);
  });

  it('skips the methods of a transient provider with a warning (its instance is a placeholder)', async () => {
    const prefix = uniquePrefix('worker-modules');
    @Injectable({ scope: Scope.TRANSIENT })
    class TransientWorker {
      @QueueWorker('orders')
      async handle(): Promise<void> {}

      @OnQueueEvent('orders', 'completed')
      completed(): void {}
    }
    @Injectable()
    class Consumer {
      constructor(readonly worker: TransientWorker) {}
    }

    const started = jest.spyOn(QueueService.prototype, 'process');
    const warnings = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const app = await (
        await Test.createTestingModule({
          imports: [RedisLockModule.forRoot({ redis: server.url, keyPrefix: prefix })],
          providers: [TransientWorker, Consumer],
        }).compile()
      ).init();
      await app.close();
      expect(started).not.toHaveBeenCalled();
      expect(warnings).toHaveBeenCalledWith(
        '@QueueWorker on TransientWorker.handle ignored: the provider is transient',
      );
      expect(warnings).toHaveBeenCalledWith(
        '@OnQueueEvent on TransientWorker.completed ignored: the provider is transient',
      );
    } finally {
      started.mockRestore();
      warnings.mockRestore();
    }
  });
});
