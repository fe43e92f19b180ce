import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { LockService } from '../../lib';
import { createLockApp, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/** One command the server ran, as MONITOR reports it: from a script (`lua`) or a client. */
interface Seen {
  command: string;
  args: string[];
  lua: boolean;
}

describe('LockService: what an uncontended lock costs the server (dedicated redis-server)', () => {
  const prefix = uniquePrefix('lock-cost');
  let server: RedisServer;
  let app: INestApplicationContext;
  let locks: LockService;
  let client: Redis;
  let monitor: Redis;
  const seen: Seen[] = [];

  beforeAll(async () => {
    // A server of its own: MONITOR sees this file's commands alone.
    server = await startRedisServer();
    app = await createLockApp({ redis: server.url, keyPrefix: prefix });
    locks = app.get(LockService);
    client = new Redis(server.url);
    monitor = await client.monitor();
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      seen.push({ command: args[0].toLowerCase(), args: args.slice(1), lua: source === 'lua' });
    });
  });
  afterAll(async () => {
    monitor.disconnect();
    client.disconnect();
    await app.close();
    await server.stop();
  });

  it('acquire + release: two script calls given the lock and fence keys alone, six commands inside them', async () => {
    // Loaded before the window, so that both calls below are EVALSHAs that ran.
    await (await locks.acquire('warm', { waitMs: 1_000 })).release();
    await waitFor('the warm-up seen', () => seen.some((s) => s.command === 'del'));
    seen.length = 0;
    const lock = await locks.acquire('order:1', { waitMs: 1_000 });
    await lock.release();
    await waitFor('the release seen', () => seen.some((s) => s.command === 'del'));

    const value = `${prefix}lock:{order:1}`;
    // (The instance's owner record, refreshed on a timer, is a plain SET: not a script call.)
    const calls = seen.filter((s) => !s.lua && s.command.startsWith('eval'));
    expect(calls.map((s) => s.command)).toEqual(['evalsha', 'evalsha']);
    const [acquire, release] = calls.map((s) => s.args);
    // EVALSHA sha numkeys keys… args…: the value and fence keys; the line, entries and channel
    // are named by the scripts after the value key.
    expect(acquire.slice(1, 4)).toEqual(['2', value, `${prefix}lock-fence`]);
    expect(release.slice(1, 4)).toEqual(['2', value, `${prefix}lock-fence`]);
    // A try-first acquire sends token, ttl, flags and the fence counter's TTL (no entry TTL).
    expect(acquire).toHaveLength(4 + 4);
    expect(release).toHaveLength(4 + 3);
    // Inside: EXISTS of the line, SET NX, the fence (TIME, SET … GET); GET, DEL.
    const inside = seen.filter((s) => s.lua);
    expect(inside.map((s) => s.command)).toEqual(['exists', 'set', 'time', 'set', 'get', 'del']);
    expect(inside[0].args).toEqual([`${value}:line`]);
  });
});
