import 'reflect-metadata';
import { join } from 'node:path';
import { Logger, type INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { LockService } from '../../lib';
import { LatencyProxy } from '../faults/support/latency-proxy';
import {
  commandCalls,
  createLockApp,
  redisClient,
  sleep,
  uniquePrefix,
  waitForLine,
  scriptsIn,
} from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/**
 * One-way delay of the link to Redis (through a TCP proxy). The subscriber's handshake then lasts
 * a round trip of at least 2 × 10 ms after its socket connected, and the second waiter's SUBSCRIBE,
 * sent 0–3 ms after the first one's, falls inside it, as it does on a link to a remote Redis (on
 * a local link the handshake lasts about a millisecond and is hit only by chance).
 */
const DELAY_MS = 10;
const MODULES = 12;

describe('PubSubHub: the subscriber connection of a fresh module', () => {
  let server: RedisServer;
  let proxy: LatencyProxy;
  let redis: Redis;
  /** The module under test (one at a time), closed by `afterAll` when a test failed midway. */
  let app: INestApplicationContext | undefined;

  beforeAll(async () => {
    server = await startRedisServer();
    proxy = new LatencyProxy(server.port, DELAY_MS);
    await proxy.start();
    redis = redisClient(server.url);
  });
  afterAll(async () => {
    await app?.close();
    redis.disconnect();
    await proxy.close();
    await server.stop();
  });

  it('runs on the ioredis install this jest project names', () => {
    // The matrix config (jest.ioredis-matrix.config.js) names one install per project.
    const matrixDir = (globalThis as { IOREDIS_MATRIX_DIR?: string }).IOREDIS_MATRIX_DIR;
    const expected = matrixDir ?? join(__dirname, '../../node_modules/ioredis');
    expect(require.resolve('ioredis')).toBe(require.resolve(expected));
  });

  it(`hands the lock over by pub/sub to the first two waiters of ${MODULES} fresh modules, with no poll and no reconnect`, async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn');
    /** Per module: script calls beyond the two releases (a waiter that polled adds one). */
    const extraCalls: number[] = [];
    for (let i = 0; i < MODULES; i++) {
      const prefix = uniquePrefix(`subscriber-ready-${i}`);
      // A poll interval far beyond a handoff: a waiter given the lock by the release but deaf to
      // its message would hold it idle until its next attempt, one more EVALSHA.
      app = await createLockApp({
        redis: proxy.url,
        keyPrefix: prefix,
        retryIntervalMs: 4_000,
      });
      const locks = app.get(LockService);
      // Held by another instance: callers of the fresh module itself would wait in its local
      // cohort, without any subscription.
      const holder = await createLockApp({ redis: server.url, keyPrefix: prefix });
      const holders = holder.get(LockService);
      const a = await holders.acquire('a');
      const b = await holders.acquire('b');
      const waitingA = locks.acquire('a', { waitMs: 30_000 });
      // The second waiter starts 0–3 ms after the first (not to let anything settle).
      await sleep(i % 4);
      const waitingB = locks.acquire('b', { waitMs: 30_000 });
      await waitForLine(redis, prefix, 'a');
      await waitForLine(redis, prefix, 'b');

      await redis.config('RESETSTAT');
      await a.release();
      const lockA = await waitingA;
      await b.release();
      const lockB = await waitingB;
      extraCalls.push(scriptsIn(await commandCalls(redis)) - 2);
      expect(lockA.fence).toBeGreaterThan(a.fence);
      expect(lockB.fence).toBeGreaterThan(b.fence);
      await app.close();
      app = undefined;
      await holder.close();
    }
    const connectionErrors = warn.mock.calls
      .map(([message]) => String(message))
      .filter((message) => /connection error/.test(message));
    expect({ extraCalls, connectionErrors }).toEqual({
      extraCalls: new Array(MODULES).fill(0),
      connectionErrors: [],
    });
  }, 120_000);

  it('subscribes through a copy of a client made with lazyConnect and enableOfflineQueue: false', async () => {
    const prefix = uniquePrefix('subscriber-lazy');
    // The module's subscriber copies these options: it starts unconnected, and a SUBSCRIBE sent
    // before it is ready would be rejected instead of queued.
    const client = new Redis(server.url, { lazyConnect: true, enableOfflineQueue: false });
    await client.connect();
    app = await createLockApp({ redis: client, keyPrefix: prefix, retryIntervalMs: 600_000 });
    const locks = app.get(LockService);
    const holder = await createLockApp({ redis: server.url, keyPrefix: prefix });
    const held = await holder.get(LockService).acquire('lazy');
    const waiting = locks.acquire('lazy', { waitMs: 10_000 });
    await waitForLine(redis, prefix, 'lazy');
    await redis.config('RESETSTAT');
    await held.release();
    const lock = await waiting;
    // Only the release ran a script: the waiter was handed the lock by its message.
    expect(scriptsIn(await commandCalls(redis))).toBe(1);
    expect(lock.fence).toBeGreaterThan(held.fence);
    await app.close();
    app = undefined;
    await holder.close();
    client.disconnect();
  });
});
