import 'reflect-metadata';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { LockService, RedisUnavailableError } from '../../lib';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import { LuaScript } from '../../lib/redis/lua-script';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';
import { whileBusy } from '../support/busy-script';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/**
 * Calls sent back to back on one connection run in that order, whether or not the server has the
 * script cached: a release that undoes an attempt is sent behind it and must run behind it. A
 * server's cache is empty after a restart and on a promoted replica.
 */
describe('scripts run in the order they were sent', () => {
  let server: RedisServer;
  let folder: string;
  let setScript: LuaScript;
  let delScript: LuaScript;

  beforeAll(async () => {
    server = await startRedisServer();
    folder = mkdtempSync(join(tmpdir(), 'script-order-'));
    // A nonce: scripts no server has seen yet.
    const nonce = randomBytes(8).toString('hex');
    writeFileSync(
      join(folder, 'set.lua'),
      `-- ${nonce}\nreturn redis.call('SET', KEYS[1], ARGV[1])`,
    );
    writeFileSync(join(folder, 'del.lua'), `-- ${nonce}\nreturn redis.call('DEL', KEYS[1])`);
    setScript = new LuaScript('set', join(folder, 'set.lua'));
    delScript = new LuaScript('del', join(folder, 'del.lua'));
  });
  afterAll(async () => {
    await server.stop();
    rmSync(folder, { recursive: true, force: true });
  });

  /** Sends `set` and then `del` of one key without waiting in between: the key must be gone. */
  async function setThenDelete(client: Redis, key: string): Promise<number> {
    await Promise.all([setScript.run(client, [key], ['v']), delScript.run(client, [key], [])]);
    return client.exists(key);
  }

  it('a script the server lacks runs before the cached one sent behind it', async () => {
    const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    try {
      await delScript.run(client, ['warm'], []);
      expect(await client.script('EXISTS', setScript.sha, delScript.sha)).toEqual([0, 1]);
      expect(await setThenDelete(client, 'k1')).toBe(0);
    } finally {
      client.disconnect();
    }
  });

  it('after the server restarted empty, on the reconnected connection', async () => {
    const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    try {
      expect(await setThenDelete(client, 'k2')).toBe(0);
      await server.stop();
      await server.restart();
      await waitFor('the reconnection', () => client.status === 'ready', 10_000);
      // Only the second script back in the server's cache, as after a holder's release.
      const other = redisClient(server.url);
      await other.script('LOAD', delScript.source);
      other.disconnect();
      expect(await client.script('EXISTS', setScript.sha, delScript.sha)).toEqual([0, 1]);
      expect(await setThenDelete(client, 'k3')).toBe(0);
    } finally {
      client.disconnect();
    }
  });

  it('an EVAL refused before it ran (BUSY) is sent by EVAL again, so the call behind it cannot overtake it', async () => {
    const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    const admin = redisClient(server.url);
    try {
      await admin.script('FLUSH');
      // The server runs another script past its threshold: this first call is refused unrun.
      await whileBusy(server.url, () =>
        expect(setScript.run(client, ['k4'], ['v'])).rejects.toThrow(/^BUSY/),
      );
      expect(await setThenDelete(client, 'k5')).toBe(0);
    } finally {
      client.disconnect();
      admin.disconnect();
    }
  });
});

describe('a timed-out acquisition is undone after a restart emptied the script cache', () => {
  const prefix = uniquePrefix('script-order');
  let server: RedisServer;
  let app: INestApplicationContext;
  let locks: LockService;

  beforeAll(async () => {
    server = await startRedisServer();
    app = await createLockApp({ redis: server.url, keyPrefix: prefix, commandTimeoutMs: 300 });
    locks = app.get(LockService);
  });
  afterAll(async () => {
    server.process.kill('SIGCONT');
    await app.close();
    await server.stop();
  });

  it('leaves the lock free, not taken by a token nobody holds', async () => {
    const held = (await locks.tryAcquire('before', { ttlMs: 60_000 }))!;
    await server.stop();
    await server.restart();
    await waitFor(
      'the reconnection',
      async () => (await locks.isLocked('x').catch(() => undefined)) === false,
      10_000,
    );
    // The holder's release caches the release script only.
    await held.release();
    server.process.kill('SIGSTOP');
    const attempt = locks.tryAcquire('stalled', { ttlMs: 20_000 });
    await expect(attempt).rejects.toBeInstanceOf(RedisUnavailableError);
    server.process.kill('SIGCONT');
    // A call on the same connection, answered once the attempt and its undo have run.
    expect(await locks.isLocked('x')).toBe(false);
    const redis = redisClient(server.url);
    try {
      expect(await redis.exists(lockRedisKeys(prefix, 'stalled').value)).toBe(0);
      const lock = await locks.tryAcquire('stalled');
      expect(lock).not.toBeNull();
      await lock!.release();
    } finally {
      redis.disconnect();
    }
  });

  it('after a SCRIPT FLUSH on a live connection: the late reply of the attempt releases it again', async () => {
    // The acquire script was sent on this connection (EVALSHA next time), the release never was
    // (EVAL): after the flush, the attempt's NOSCRIPT fallback reaches Redis after the undo.
    const fresh = await createLockApp({
      redis: server.url,
      keyPrefix: uniquePrefix('flush'),
      commandTimeoutMs: 300,
    });
    const locks = fresh.get(LockService);
    expect(await locks.tryAcquire('warm-only', { ttlMs: 100 })).not.toBeNull();
    await new Promise((r) => setTimeout(r, 150));
    const admin = redisClient(server.url);
    try {
      await admin.script('FLUSH');
      await admin.client('PAUSE', 600, 'ALL');
      await expect(locks.tryAcquire('flushed', { ttlMs: 20_000 })).rejects.toBeInstanceOf(
        RedisUnavailableError,
      );
      // Free once both ran (before, held by the failed attempt's token for its 20 s).
      await waitFor(
        "'flushed' granted to another caller",
        async () => {
          // (Until the pause ends, a call times out.)
          const lock = await locks.tryAcquire('flushed').catch(() => null);
          await lock?.release();
          return lock !== null;
        },
        3_000,
      );
    } finally {
      admin.disconnect();
      await fresh.close();
    }
  });
});
