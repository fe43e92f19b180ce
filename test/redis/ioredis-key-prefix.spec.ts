import type { INestApplicationContext } from '@nestjs/common';
import { Cluster, Redis } from 'ioredis';
import {
  LockService,
  RedisLockOptionsError,
  createRedisLock,
  type RedisLockModuleOptions,
} from '../../lib';
import { createLockApp, uniquePrefix } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/**
 * ioredis's own `keyPrefix` prefixes the keys of the library's scripts but not the pub/sub
 * channels those scripts publish on (nor the ones the library subscribes to): every release
 * announced itself on a channel nobody listened to, and each handoff waited for a waiter's poll
 * (~850 ms instead of ~1 ms) with nothing saying why. The start refuses it, wherever ioredis
 * would read it from, and points to the module's own `keyPrefix`.
 */
describe("an ioredis keyPrefix in the connection options is refused at start (the module's keyPrefix is the one to use)", () => {
  let server: RedisServer;
  const opened: Array<Redis | Cluster> = [];

  beforeAll(async () => {
    // A server of its own: the test counts its client connections.
    server = await startRedisServer();
  });
  afterAll(async () => {
    for (const client of opened) client.disconnect();
    await server.stop();
  });

  const host = '127.0.0.1';
  const message = (option: string) =>
    new RegExp(
      `^invalid option '${option.replace(/[[\].]/g, '\\$&')}': expected no ioredis keyPrefix: ` +
        "use the module's own 'keyPrefix' option instead \\(ioredis prefixes the keys of the " +
        'scripts but not the pub/sub channels',
    );
  /** What the start of a module with `options` threw (undefined: it started; it is closed again). */
  async function startError(options: RedisLockModuleOptions): Promise<unknown> {
    try {
      const app = await createLockApp({ keyPrefix: uniquePrefix('iokp'), ...options });
      await app.close();
      return undefined;
    } catch (err) {
      return err;
    }
  }
  async function expectRefused(options: RedisLockModuleOptions, option: string): Promise<void> {
    const err = await startError(options);
    expect(err).toBeInstanceOf(RedisLockOptionsError);
    expect((err as RedisLockOptionsError).option).toBe(option);
    expect((err as Error).message).toMatch(message(option));
  }
  const clientConnections = async () => {
    const admin = new Redis(server.url);
    try {
      const list = (await admin.call('CLIENT', 'LIST')) as string;
      return list.trim().split('\n').length - 1; // less the admin's own
    } finally {
      admin.disconnect();
    }
  };

  it('an ioredis options object (single node), and a URL with ?keyPrefix=; the refused start opened no connection', async () => {
    const before = await clientConnections();
    await expectRefused(
      { redis: { host, port: server.port, keyPrefix: 'app:' } },
      'redis.keyPrefix',
    );
    const url = `${server.url}?keyPrefix=app:`;
    const err = await startError({ redis: url });
    expect(err).toBeInstanceOf(RedisLockOptionsError);
    expect((err as Error).message).toMatch(message('redis'));
    expect((err as RedisLockOptionsError).value).toBe(url);
    expect(await clientConnections()).toBe(before);
  });

  it('a Redis client passed in (left open: it is the caller’s)', async () => {
    const client = new Redis(server.url, { keyPrefix: 'app:' });
    opened.push(client);
    await expectRefused({ redis: client }, 'redis.options.keyPrefix');
    expect(await client.ping()).toBe('PONG');
  });

  it('a Cluster client passed in (keyPrefix or redisOptions.keyPrefix), and { cluster, options }', async () => {
    const viaRedisOptions = new Cluster([{ host, port: server.port }], {
      lazyConnect: true,
      redisOptions: { keyPrefix: 'app:' },
    });
    const direct = new Cluster([{ host, port: server.port }], {
      lazyConnect: true,
      keyPrefix: 'app:',
    });
    opened.push(viaRedisOptions, direct);
    // ioredis copies redisOptions.keyPrefix to the Cluster's own keyPrefix.
    await expectRefused({ redis: viaRedisOptions }, 'redis.options.keyPrefix');
    await expectRefused({ redis: direct }, 'redis.options.keyPrefix');
    await expectRefused(
      { redis: { cluster: [{ host, port: server.port }], options: { keyPrefix: 'app:' } } },
      'redis.options.keyPrefix',
    );
    await expectRefused(
      {
        redis: {
          cluster: [{ host, port: server.port }],
          options: { redisOptions: { keyPrefix: 'app:' } },
        },
      },
      'redis.options.redisOptions.keyPrefix',
    );
  });

  it('Sentinel options', async () => {
    await expectRefused(
      { redis: { sentinels: [{ host, port: 1 }], name: 'mymaster', keyPrefix: 'app:' } },
      'redis.keyPrefix',
    );
  });

  it('a quorum node (nodes[i]), and the standalone createRedisLock', async () => {
    await expectRefused(
      {
        nodes: [
          server.url,
          { host, port: server.port, db: 1, keyPrefix: 'app:' },
          `${server.url}/2`,
        ],
      },
      'nodes[1].keyPrefix',
    );
    await expectRefused(
      { nodes: [server.url, `${server.url}/1`, `${server.url}/2?keyPrefix=app:`] },
      'nodes[2]',
    );
    const standalone = createRedisLock({ redis: { host, port: server.port, keyPrefix: 'app:' } });
    await expect(standalone).rejects.toBeInstanceOf(RedisLockOptionsError);
    await expect(standalone).rejects.toThrow(message('redis.keyPrefix'));
  });

  it("an empty ioredis keyPrefix (its default) is accepted, and with the module's keyPrefix a release wakes the waiter at once", async () => {
    const keyPrefix = uniquePrefix('iokp-module');
    const apps: INestApplicationContext[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        apps.push(
          await createLockApp({ redis: { host, port: server.port, keyPrefix: '' }, keyPrefix }),
        );
      }
      const [a, b] = apps.map((app) => app.get(LockService));
      const held = await a.acquire('k');
      const waiter = b.acquire('k', { waitMs: 5_000 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      const released = performance.now();
      await held.release();
      const next = await waiter;
      // Woken by the release's message, not by a poll (~1 s).
      expect(performance.now() - released).toBeLessThan(400);
      await next.release();
    } finally {
      for (const app of apps) await app.close();
    }
  });
});
