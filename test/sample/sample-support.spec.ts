import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import fc from 'fast-check';
import { LockService } from '../../lib';
import { outageOf } from '../../sample/common/outage';
import { requireLock } from '../../sample/common/require-lock';
import {
  loadSampleConfig,
  redactDatabaseUrl,
  redactRedisUrl,
} from '../../sample/config/sample-config';
import { STOCK_LOCK_TEMPLATE, stockLockKey } from '../../sample/flash-sale/flash-sale-keys';
import { latencyHistogram } from '../../sample/load/latency-histogram';
import { loadOptions } from '../../sample/load/load-options';
import { EDITOR_LOCK_TEMPLATE, editorLockKey } from '../../sample/task-desk/task-desk-keys';
import { createLockApp, uniquePrefix } from '../support/helpers';

describe('sample configuration from the environment', () => {
  it('takes the defaults for unset and empty variables', () => {
    expect({ ...loadSampleConfig({ REDIS_URL: '', PORT: '' }) }).toEqual({
      redisUrl: 'redis://127.0.0.1:6379',
      port: 3000,
      host: '127.0.0.1',
      redisClusterNodes: undefined,
      redisSentinels: undefined,
      redisSentinelName: 'mymaster',
      databaseUrl: undefined,
      ordersMaxSize: 10_000,
      keyPrefix: 'sample:',
      deskLeaseMs: 30_000,
      deskMaxAttempts: 5,
      saleHoldMs: 10_000,
    });
  });

  it('reads REDIS_URL, DATABASE_URL, ORDERS_MAX_SIZE, PORT, HOST, KEY_PREFIX, DESK_LEASE_MS and DESK_MAX_ATTEMPTS', () => {
    expect({
      ...loadSampleConfig({
        REDIS_URL: 'rediss://cache:6380/2',
        DATABASE_URL: 'postgres://shop:pw@db:5432/shop',
        ORDERS_MAX_SIZE: '500',
        PORT: '0',
        HOST: '0.0.0.0',
        KEY_PREFIX: 'shop:',
        DESK_LEASE_MS: '500',
        DESK_MAX_ATTEMPTS: '3',
      }),
    }).toEqual({
      redisUrl: 'rediss://cache:6380/2',
      redisClusterNodes: undefined,
      redisSentinels: undefined,
      redisSentinelName: 'mymaster',
      databaseUrl: 'postgres://shop:pw@db:5432/shop',
      ordersMaxSize: 500,
      port: 0,
      host: '0.0.0.0',
      keyPrefix: 'shop:',
      deskLeaseMs: 500,
      deskMaxAttempts: 3,
      saleHoldMs: 10_000,
    });
  });

  it('refuses bad values, naming the variable and the value', () => {
    expect(() => loadSampleConfig({ PORT: 'http' })).toThrow(
      "sample config: PORT must be a whole number, got 'http'",
    );
    expect(() => loadSampleConfig({ PORT: '70000' })).toThrow(
      'sample config: port must be an integer from 0 to 65535, got 70000',
    );
    expect(() => loadSampleConfig({ DESK_LEASE_MS: '0' })).toThrow(/deskLeaseMs/);
    expect(() => loadSampleConfig({ REDIS_URL: 'localhost:6379' })).toThrow(
      "sample config: redisUrl must be a redis:// or rediss:// URL, got 'localhost:6379'",
    );
    expect(() => loadSampleConfig({ DATABASE_URL: 'mysql://shop:pw@db/shop' })).toThrow(
      "sample config: DATABASE_URL must be a postgres:// or postgresql:// URL, got 'mysql://shop:***@db/shop'",
    );
    expect(() => loadSampleConfig({ ORDERS_MAX_SIZE: '0' })).toThrow(/ordersMaxSize/);
  });

  it('reads REDIS_CLUSTER_NODES as Cluster nodes, naming the variable when malformed', () => {
    expect(
      loadSampleConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-b:7001,[::1]:7002' })
        .redisClusterNodes,
    ).toEqual([
      { host: '10.0.0.1', port: 7000 },
      { host: 'redis-b', port: 7001 },
      { host: '::1', port: 7002 },
    ]);
    expect(loadSampleConfig({}).redisClusterNodes).toBeUndefined();
    expect(() => loadSampleConfig({ REDIS_CLUSTER_NODES: 'redis://a:7000' })).toThrow(
      "sample config: REDIS_CLUSTER_NODES must be host:port[,host:port…], got 'redis://a:7000'",
    );
    expect(() => loadSampleConfig({ REDIS_CLUSTER_NODES: 'a:70000' })).toThrow(/port/);
  });

  it('reads REDIS_SENTINELS, REDIS_SENTINEL_NAME and SALE_HOLD_MS, naming the variable when malformed', () => {
    const config = loadSampleConfig({
      REDIS_SENTINELS: 's1:26379,s2:26380',
      REDIS_SENTINEL_NAME: 'shop',
      SALE_HOLD_MS: '2500',
    });
    expect(config.redisSentinels).toEqual([
      { host: 's1', port: 26379 },
      { host: 's2', port: 26380 },
    ]);
    expect(config.redisSentinelName).toBe('shop');
    expect(config.saleHoldMs).toBe(2_500);
    expect(() => loadSampleConfig({ REDIS_SENTINELS: 's1' })).toThrow(
      "sample config: REDIS_SENTINELS must be host:port[,host:port…], got 's1'",
    );
    expect(() => loadSampleConfig({ SALE_HOLD_MS: '999' })).toThrow(
      'sample config: saleHoldMs must be an integer from 1000 to 3600000, got 999',
    );
  });

  it('hides the password of a database URL', () => {
    expect(redactDatabaseUrl('postgres://shop:secret@db:5432/shop')).toBe(
      'postgres://shop:***@db:5432/shop',
    );
    expect(redactDatabaseUrl('postgresql://db:5432/shop')).toBe('postgresql://db:5432/shop');
  });

  it('hides the password of a Redis URL in logs', () => {
    expect(redactRedisUrl('redis://:secret@cache:6379/0')).toBe('redis://:***@cache:6379/0');
    expect(redactRedisUrl('rediss://app:secret@cache:6380')).toBe('rediss://app:***@cache:6380');
    expect(redactRedisUrl('redis://cache:6379')).toBe('redis://cache:6379');
  });
});

describe('outageOf (503, never 500)', () => {
  const named = (name: string, message: string, code?: string) =>
    Object.assign(new Error(message), { name }, code === undefined ? {} : { code });

  it('says Redis for failover replies, client timeouts and the replication and lock-lost errors', () => {
    expect(outageOf(named('ReplyError', 'MOVED 7350 127.0.0.1:7001'))).toBe('Redis');
    expect(outageOf(named('ReplyError', 'CLUSTERDOWN The cluster is down'))).toBe('Redis');
    expect(outageOf(new Error('Command timed out'))).toBe('Redis');
    expect(outageOf(named('MaxRetriesPerRequestError', 'Reached the max retries'))).toBe('Redis');
    expect(outageOf(named('QueueReplicationError', 'x'))).toBe('Redis');
    expect(outageOf(named('LockLostError', "lock 'stock:a' was lost"))).toBe('Redis');
  });

  it('says the database for refused connections and PostgreSQL connection states', () => {
    expect(outageOf(named('Error', 'connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED'))).toBe(
      'the database',
    );
    expect(outageOf(named('error', 'terminating connection', '57P01'))).toBe('the database');
    expect(outageOf(new Error('Connection terminated unexpectedly'))).toBe('the database');
  });

  it('leaves everything else to a 500', () => {
    expect(outageOf(new Error('boom'))).toBeUndefined();
    expect(outageOf(named('ReplyError', 'WRONGTYPE Operation against a key'))).toBeUndefined();
    expect(outageOf(named('error', 'duplicate key value', '23505'))).toBeUndefined();
    expect(outageOf('text')).toBeUndefined();
  });
});

describe('sample:load options', () => {
  it('defaults to stock 100, 5,000 buyers, 200 connections against 127.0.0.1:3000', () => {
    expect(loadOptions([], {})).toEqual({
      url: 'http://127.0.0.1:3000',
      stock: 100,
      buyers: 5_000,
      connections: 200,
      presses: 1,
      instances: 0,
      database: 'embedded',
    });
  });

  it('starts instances on PostgreSQL with --instances, and refuses several on the embedded one', () => {
    expect(loadOptions(['--instances', '3'], {})).toMatchObject({
      instances: 3,
      database: 'postgres',
    });
    expect(loadOptions([], { LOAD_INSTANCES: '1', LOAD_DATABASE: 'postgres' })).toMatchObject({
      instances: 1,
      database: 'postgres',
    });
    expect(() => loadOptions(['--instances', '2', '--database', 'embedded'], {})).toThrow(
      '--database embedded runs one instance only (each would have its own database): use --database postgres with --instances 2',
    );
    expect(() => loadOptions(['--database', 'mysql'], {})).toThrow(
      "--database (LOAD_DATABASE) must be postgres or embedded, got 'mysql'",
    );
  });

  it('takes flags over environment variables', () => {
    expect(
      loadOptions(['--stock', '10', '--url', 'http://10.0.0.5:8080/'], {
        LOAD_STOCK: '7',
        LOAD_BUYERS: '50',
        SAMPLE_URL: 'http://127.0.0.1:1',
      }),
    ).toEqual({
      url: 'http://10.0.0.5:8080',
      stock: 10,
      buyers: 50,
      connections: 200,
      presses: 1,
      instances: 0,
      database: 'embedded',
    });
  });

  it('refuses bad values and unknown flags', () => {
    expect(() => loadOptions(['--connections', '0'], {})).toThrow(
      "--connections (LOAD_CONNECTIONS) must be an integer from 1 to 10000000, got '0'",
    );
    expect(() => loadOptions([], { SAMPLE_URL: 'http://host/path' })).toThrow(
      "--url (SAMPLE_URL) must be http(s)://host:port, got 'http://host/path'",
    );
    expect(() => loadOptions(['--rate', '5'], {})).toThrow(/rate/);
  });
});

describe('latencyHistogram', () => {
  it('draws one bar per 1-2-5 bucket from the fastest to the slowest, scaled to the fullest', () => {
    expect(latencyHistogram([3, 4, 4, 4, 12, 250], 8)).toBe(
      [
        '        2–5 ms | ████████ 4',
        '       5–10 ms | 0',
        '      10–20 ms | ██ 1',
        '      20–50 ms | 0',
        '     50–100 ms | 0',
        '    100–200 ms | 0',
        '    200–500 ms | ██ 1',
      ].join('\n'),
    );
  });

  it('puts 10 s and more in an open bucket, and says so when there is nothing', () => {
    expect(latencyHistogram([0, 12_000], 4)).toMatch(/\n {4}≥ 10000 ms \| ████ 1$/);
    expect(latencyHistogram([])).toBe('(no responses)');
  });
});

describe('sample lock keys', () => {
  it('builds the names the @WithLock templates give for a first argument', () => {
    expect([STOCK_LOCK_TEMPLATE, EDITOR_LOCK_TEMPLATE]).toEqual(['stock:<0>', 'editor:<0>']);
    fc.assert(
      fc.property(fc.string(), (id) => {
        expect(stockLockKey(id)).toBe(`stock:${id}`);
        expect(editorLockKey(id)).toBe(`editor:${id}`);
      }),
    );
  });
});

describe('requireLock', () => {
  let app: INestApplicationContext;
  let locks: LockService;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: uniquePrefix('sample-require-lock') });
    locks = app.get(LockService);
  });

  afterAll(() => app?.close());

  it('returns the lock the call runs under', async () => {
    const key = stockLockKey('phone');
    await locks.withLock(key, (held) => {
      expect(requireLock(locks, key, 'FlashSaleService.buy')).toBe(held);
    });
  });

  it('throws a plain Error naming the method and the lock when the call holds no such lock', async () => {
    expect(() => requireLock(locks, stockLockKey('phone'), 'FlashSaleService.buy')).toThrow(
      new Error("FlashSaleService.buy must run under the lock 'stock:phone' (@WithLock)"),
    );
    // Another lock held does not count.
    await locks.withLock(editorLockKey('ann'), () => {
      expect(() => requireLock(locks, stockLockKey('phone'), 'FlashSaleService.buy')).toThrow(
        "must run under the lock 'stock:phone'",
      );
    });
  });
});
