import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  LockService,
  QueueService,
  RedisLockModule,
  RedisLockOptionsError,
  type RedisLockModuleOptions,
} from '../lib';
import { testRedisUrl, uniquePrefix, waitFor } from './support/helpers';

describe('RedisLockModule', () => {
  const prefix = uniquePrefix('module');

  async function acquireAndRelease(locks: LockService): Promise<void> {
    const lock = await locks.acquire('probe');
    expect(await lock.release()).toBe(true);
  }

  it('forRoot provides a working LockService and QueueService', async () => {
    const ref = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefix })],
    }).compile();
    const app = await ref.init();
    try {
      await acquireAndRelease(app.get(LockService));
      expect(app.get(QueueService)).toBeInstanceOf(QueueService);
    } finally {
      await app.close();
    }
  });

  it('forRootAsync with useFactory and inject', async () => {
    @Injectable()
    class Config {
      url = testRedisUrl();
    }
    @Module({ providers: [Config], exports: [Config] })
    class ConfigModule {}
    const ref = await Test.createTestingModule({
      imports: [
        RedisLockModule.forRootAsync({
          imports: [ConfigModule],
          inject: [Config],
          useFactory: (config: Config) => ({ redis: config.url, keyPrefix: prefix }),
        }),
      ],
    }).compile();
    const app = await ref.init();
    try {
      await acquireAndRelease(app.get(LockService));
    } finally {
      await app.close();
    }
  });

  it('forRootAsync with useClass and useExisting', async () => {
    @Injectable()
    class OptionsFactory {
      createRedisLockOptions(): RedisLockModuleOptions {
        return { redis: testRedisUrl(), keyPrefix: prefix };
      }
    }
    @Module({ providers: [OptionsFactory], exports: [OptionsFactory] })
    class OptionsModule {}
    for (const imports of [
      [RedisLockModule.forRootAsync({ useClass: OptionsFactory })],
      [
        RedisLockModule.forRootAsync({
          imports: [OptionsModule],
          useExisting: OptionsFactory,
        }),
      ],
    ]) {
      const app = await (await Test.createTestingModule({ imports }).compile()).init();
      try {
        await acquireAndRelease(app.get(LockService));
      } finally {
        await app.close();
      }
    }
  });

  it('isGlobal makes LockService injectable in every module', async () => {
    @Injectable()
    class Consumer {
      constructor(readonly locks: LockService) {}
    }
    @Module({ providers: [Consumer] })
    class FeatureModule {}
    const ref = await Test.createTestingModule({
      imports: [
        RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefix, isGlobal: true }),
        FeatureModule,
      ],
    }).compile();
    const app = await ref.init();
    try {
      await acquireAndRelease(app.get(Consumer).locks);
    } finally {
      await app.close();
    }
  });

  it('leaves a Redis instance passed in open, and releases its locks on shutdown', async () => {
    const client = new Redis(testRedisUrl());
    try {
      const app = await (
        await Test.createTestingModule({
          imports: [RedisLockModule.forRoot({ redis: client, keyPrefix: prefix })],
        }).compile()
      ).init();
      try {
        await app.get(LockService).acquire('held-at-shutdown', { ttlMs: 60_000 });
      } finally {
        await app.close();
      }
      expect(client.status).toBe('ready');
      expect(await client.exists(`${prefix}lock:{held-at-shutdown}`)).toBe(0);
    } finally {
      client.disconnect();
    }
  });

  it('closes the client it created on shutdown', async () => {
    const watcher = new Redis(testRedisUrl());
    const name = `owned-${prefix}`;
    try {
      const app = await (
        await Test.createTestingModule({
          imports: [
            RedisLockModule.forRoot({
              redis: { ...urlOptions(), connectionName: name },
              keyPrefix: prefix,
            }),
          ],
        }).compile()
      ).init();
      const connected = async () =>
        ((await watcher.client('LIST')) as string).includes(`name=${name} `);
      try {
        await acquireAndRelease(app.get(LockService));
        expect(await connected()).toBe(true);
      } finally {
        await app.close();
      }
      await waitFor('the owned connection to close', async () => !(await connected()));
    } finally {
      watcher.disconnect();
    }
  });

  it.each([
    [{ ttlMs: 0 }, "invalid option 'ttlMs'"],
    [{ waitMs: -1 }, "invalid option 'waitMs'"],
    [{ retryIntervalMs: 2.5 }, "invalid option 'retryIntervalMs'"],
    [{ fair: 1 }, "invalid option 'fair'"],
    [{ keyPrefix: 7 }, "invalid option 'keyPrefix'"],
    [{ keyPrefix: 'app{' }, "invalid option 'keyPrefix': expected no '{' but in a complete"],
    [{ keyPrefix: 'app{}:' }, "got 'app{}:'"],
    [{ commandTimeoutMs: 0 }, "invalid option 'commandTimeoutMs'"],
    [{ redis: 'localhost:6379' }, "invalid option 'redis'"],
    [{ queue: { leaseMs: -1 } }, "invalid option 'queue.leaseMs'"],
    [{ queue: { lease: 1 } }, "invalid option 'queue.lease'"],
    [{ tllMs: 1000 }, "invalid option 'tllMs'"],
    [{ maxLocalHandoffs: -1 }, "invalid option 'maxLocalHandoffs'"],
    [{ maxLocalHandoffs: 1.5 }, "invalid option 'maxLocalHandoffs'"],
    [{ fenceTtlMs: 999 }, "invalid option 'fenceTtlMs'"],
    [{ fenceTtlMs: '1h' }, "invalid option 'fenceTtlMs'"],
    // Only `false` opts out of the queue's replica wait, as for the lock's option.
    [{ queue: { waitForReplicas: null } }, "invalid option 'queue.waitForReplicas'"],
    [{ queue: { waitForReplicas: 0 } }, "'queue.waitForReplicas': expected an object, got 0"],
    [{ queue: { waitForReplicas: '' } }, "invalid option 'queue.waitForReplicas'"],
    // node-redis's form: ioredis ignores `url` and connected to 127.0.0.1:6379 without a word.
    [
      { redis: { url: 'redis://:S3cret-pw@10.0.0.9:6380' } },
      "invalid option 'redis.url': expected no 'url' in ioredis options (ioredis ignores it and connects to 127.0.0.1:6379): give the URL itself as 'redis' (e.g. redis: process.env.REDIS_URL), got 'redis://:***@10.0.0.9:6380'",
    ],
    [
      { nodes: ['redis://a:1', 'redis://b:1', { url: 'redis://c:1' }] },
      "invalid option 'nodes[2].url'",
    ],
  ])('fails at bootstrap on bad options %p', async (options, message) => {
    const err = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), ...(options as object) })],
    })
      .compile()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RedisLockOptionsError);
    expect((err as Error).message).toContain(message);
  });
});

function urlOptions() {
  const url = new URL(testRedisUrl());
  return { host: url.hostname, port: Number(url.port) };
}
