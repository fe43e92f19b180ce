import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { LockService } from '../../lib';
import { lockRedisKeys, waiterChannel } from '../../lib/lock/lock-keys';
import { LuaScript } from '../../lib/redis/lua-script';
import { commandCalls, createLockApp, redisClient, uniquePrefix } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/**
 * What a contended section costs Redis, in counts (issue 35; bench/contended-cost.ts measures the
 * same loop against the peers): three instances take turns on one key, each section handed from
 * one instance to the next by the release.
 */
describe('LockService on a contended key', () => {
  // A server of its own, so that command counts are this file's alone.
  let server: RedisServer;
  let redis: Redis;
  let listener: Redis;
  let apps: INestApplicationContext[];
  const prefix = uniquePrefix('lock-contended-cost');
  const INSTANCES = 3;
  const SECTIONS = 20;

  beforeAll(async () => {
    server = await startRedisServer();
    redis = redisClient(server.url);
    listener = redisClient(server.url);
    apps = await Promise.all(
      Array.from({ length: INSTANCES }, () =>
        createLockApp({ redis: server.url, keyPrefix: prefix }),
      ),
    );
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    redis.disconnect();
    listener.disconnect();
    await server.stop();
  });

  /** Each instance runs `sections` sections on `name` (holding it a few ms), all at once. */
  async function contend(name: string, sections: number): Promise<void> {
    await Promise.all(
      apps.map(async (app) => {
        const locks = app.get(LockService);
        for (let n = 0; n < sections; n++) {
          const lock = await locks.acquire(name, { waitMs: 60_000 });
          await new Promise((r) => setTimeout(r, 2));
          await lock.release();
        }
      }),
    );
  }

  it('costs one acquire script and one release script per section, a handoff reaching only the instance it is for', async () => {
    const name = 'hot';
    const { channel } = lockRedisKeys(prefix, name);
    // Every message on the lock's channel (handoffs no longer go there).
    const onLockChannel: string[] = [];
    await listener.subscribe(channel);
    listener.on('message', (_c: string, message: string) => onLockChannel.push(message));
    // Warm up: every instance has waited, so is subscribed (and stays so a while after).
    await contend(name, 3);

    // Script calls by name (the heartbeat's renewals among them, which run once a second).
    const scripts = new Map<string, number>();
    const original = LuaScript.prototype.run;
    const spy = jest.spyOn(LuaScript.prototype, 'run').mockImplementation(function (
      this: LuaScript,
      ...args
    ) {
      scripts.set(this.name, (scripts.get(this.name) ?? 0) + 1);
      return original.apply(this, args);
    });
    let calls: Map<string, number>;
    try {
      await redis.config('RESETSTAT');
      await contend(name, SECTIONS);
      calls = await commandCalls(redis);
    } finally {
      spy.mockRestore();
    }
    const sections = INSTANCES * SECTIONS;
    const renewals = scripts.get('lock renew') ?? 0;
    const per = (command: string) => calls.get(command) ?? 0;

    // One script to stand in line (or take the lock), one to release it: no try before the join
    // (before: 3 scripts a section), no poll.
    expect(scripts.get('lock acquire')).toBe(sections);
    expect(scripts.get('lock release')).toBe(sections);
    expect([...scripts.keys()].sort()).toEqual(
      renewals > 0
        ? ['lock acquire', 'lock release', 'lock renew']
        : ['lock acquire', 'lock release'],
    );
    expect(per('evalsha') + per('eval')).toBe(2 * sections + renewals);
    // The commands inside them (before: 4 ZRANGE, 3 HGET, 4 EXISTS and 4 TIME a section): a held
    // lock's waiter reads nothing of the line, a release reads its head once (ZRANGE 0 1 + HGET)
    // and one TIME serves its entries' deadlines and the fence. Renewals read no ZRANGE or HGET.
    expect(per('zrange')).toBeLessThanOrEqual(2 * sections);
    expect(per('hget')).toBeLessThanOrEqual(sections);
    expect(per('exists')).toBeLessThanOrEqual(INSTANCES);
    expect(per('time')).toBeLessThanOrEqual(2 * sections + renewals);
    // Each join renews the line and its entries (2 PEXPIRE), as each renewal does: the joins alone
    // keep a busy line alive, whose waiters may all get the lock before their first renewal.
    expect(per('pexpire')).toBeLessThanOrEqual(2 * (sections + renewals));
    // At most one message a section, on the waiter channel of the instance handed the lock:
    // nothing reached the lock's channel, which every waiting instance listens to.
    expect(per('publish')).toBeLessThanOrEqual(sections);
    expect(per('publish')).toBeGreaterThan(sections / 2);
    expect(onLockChannel).toEqual([]);
    // Each instance subscribes to its own waiter channel (still subscribed: it waited moments ago).
    for (const app of apps) {
      const lock = await app.get(LockService).acquire(name);
      const [, subscribers] = (await redis.pubsub(
        'NUMSUB',
        waiterChannel(channel, lock.token),
      )) as [string, number];
      expect(Number(subscribers)).toBe(1);
      await lock.release();
    }
  }, 60_000);
});
