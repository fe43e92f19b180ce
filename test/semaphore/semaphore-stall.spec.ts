import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  RedisUnavailableError,
  SemaphoreService,
  SemaphoreTimeoutError,
  type Permit,
} from '../../lib';
import { semaphoreRedisKeys } from '../../lib/semaphore/semaphore-keys';
import { SEMAPHORE_SCRIPTS } from '../../lib/semaphore/semaphore-scripts';
import { createLockApp, redisClient, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/**
 * An acquisition that outlives `commandTimeoutMs` rejects with `RedisUnavailableError`, but Redis
 * runs it all the same once a stall ends: what it was granted goes straight back, instead of being
 * held by a token nobody has for its whole TTL.
 */
describe('SemaphoreService: an acquisition answered after commandTimeoutMs', () => {
  let server: RedisServer;
  let admin: Redis;
  let app: INestApplicationContext;
  let semaphores: SemaphoreService;
  let prefix: string;

  beforeAll(async () => {
    server = await startRedisServer();
    admin = redisClient(server.url);
  });
  beforeEach(async () => {
    prefix = uniquePrefix('sem-stall');
    app = await createLockApp({ redis: server.url, keyPrefix: prefix, commandTimeoutMs: 300 });
    semaphores = app.get(SemaphoreService);
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await app.close();
  });
  afterAll(async () => {
    admin.disconnect();
    await server.stop();
  });

  /**
   * `call`'s first answer once the stall is over. Sent on the module's connection, so behind the
   * timed-out calls and what undoes them: it sees what they left.
   */
  async function answered<T>(call: () => Promise<T>): Promise<T> {
    let result: { value: T } | undefined;
    await waitFor(
      'an answer after the stall',
      async () => {
        try {
          result = { value: await call() };
          return true;
        } catch (err) {
          if (err instanceof RedisUnavailableError) return false;
          throw err;
        }
      },
      3_000,
    );
    return result!.value;
  }

  /**
   * Right before a waiter's check of its place (the second acquire call with one token) is sent,
   * Redis loses its scripts and stalls for `pauseMs`: the check, an EVALSHA, is answered NOSCRIPT
   * once the stall ends and sent again by EVAL, behind whatever was sent meanwhile. `sent` runs
   * once the check is sent. Returns the check's own reply (whether its caller still awaited it).
   */
  function stallTheCheck(pauseMs: number, sent?: () => void): () => Promise<unknown> {
    const script = SEMAPHORE_SCRIPTS.acquire;
    const run = script.run.bind(script);
    const tokens = new Set<string>();
    let check: Promise<unknown> | undefined;
    jest.spyOn(script, 'run').mockImplementation((client, keys, args) => {
      const token = String(args[0]);
      if (check || !tokens.has(token)) {
        tokens.add(token);
        return run(client, keys, args);
      }
      check = admin
        .multi()
        .script('FLUSH')
        .call('CLIENT', 'PAUSE', String(pauseMs), 'ALL')
        .exec()
        .then(() => {
          const reply = run(client, keys, args);
          sent?.();
          return reply;
        });
      return check;
    });
    return () => check ?? Promise.reject(new Error('no waiter checked its place'));
  }

  it('a check of its place that times out and runs after its caller gave up leaves the line again: the permit goes to the next caller', async () => {
    const keys = semaphoreRedisKeys(prefix, 'check');
    // The acquire script was sent on this connection (the check is an EVALSHA), leave-line never
    // was (the waiter's leave is an EVAL, which runs before the check's EVAL sent again).
    const holder = await semaphores.acquire('check', { limit: 1, ttlMs: 20_000 });
    const check = stallTheCheck(1_000);
    // The check times out (300 ms) and the caller gives up (600 ms), both during the stall.
    await expect(
      semaphores.acquire('check', { limit: 1, ttlMs: 20_000, waitMs: 600 }),
    ).rejects.toBeInstanceOf(SemaphoreTimeoutError);
    await check();
    // Sent behind what the check's late reply sent.
    expect(await holder.isHeld()).toBe(true);
    // Before: the given-up token back in line, to be handed the permit on release.
    expect(await admin.zrange(keys.line, 0, -1)).toEqual([]);
    expect(await admin.hlen(keys.entries)).toBe(0);
    expect(await holder.release()).toBe(true);
    const next = await semaphores.tryAcquire('check', { limit: 1 });
    expect(next).not.toBeNull();
    expect(await admin.zrange(keys.holders, 0, -1)).toEqual([next!.token]);
  });

  it('a check of its place answered in time after its caller aborted, run behind the leave, is undone: nobody holds the permits', async () => {
    const slow = await createLockApp({
      redis: server.url,
      keyPrefix: prefix,
      commandTimeoutMs: 5_000,
    });
    try {
      const sems = slow.get(SemaphoreService);
      const keys = semaphoreRedisKeys(prefix, 'abort');
      const holder = await sems.acquire('abort', { limit: 2, permits: 2, ttlMs: 20_000 });
      const controller = new AbortController();
      // The caller aborts once its check is sent, during the stall: its leave goes ahead of the
      // check's EVAL sent again, which is answered well within commandTimeoutMs.
      const check = stallTheCheck(200, () => controller.abort(new Error('caller gone')));
      await expect(
        sems.acquire('abort', {
          limit: 2,
          permits: 2,
          ttlMs: 20_000,
          waitMs: 10_000,
          signal: controller.signal,
        }),
      ).rejects.toThrow('caller gone');
      await check();
      // Before: the given-up token stayed in line (until its entry lapsed, 3 s), and the release
      // handed it both permits.
      await waitFor(
        'the given-up token out of the line',
        async () => (await admin.zcard(keys.line)) === 0,
        1_000,
      );
      expect(await holder.release()).toBe(true);
      const next = await sems.tryAcquire('abort', { limit: 2, permits: 2 });
      expect(next).not.toBeNull();
      expect(await admin.zrange(keys.holders, 0, -1)).toEqual([next!.token]);
    } finally {
      await slow.close();
    }
  });

  it('a timed-out acquisition that runs after the stall gives its permits back', async () => {
    // Scripts cached on the connection: the stalled call is an EVALSHA, as on a busy service.
    await (await semaphores.acquire('warm', { limit: 1 })).release();
    await admin.client('PAUSE', 700, 'ALL');
    await expect(
      semaphores.acquire('s', { limit: 2, permits: 2, ttlMs: 20_000 }),
    ).rejects.toBeInstanceOf(RedisUnavailableError);
    const next = await answered(() => semaphores.tryAcquire('s', { limit: 2, permits: 2 }));
    // Before: null, both permits held for 20 s by the failed acquisition's token.
    expect(next).not.toBeNull();
    expect(await admin.zrange(semaphoreRedisKeys(prefix, 's').holders, 0, -1)).toEqual([
      next!.token,
    ]);
  });

  it('a waiter whose first attempt timed out leaves the line: a release hands the permit to the next caller', async () => {
    const holder = await semaphores.acquire('w', { limit: 1, ttlMs: 20_000 });
    await admin.client('PAUSE', 700, 'ALL');
    await expect(
      semaphores.acquire('w', { limit: 1, ttlMs: 20_000, waitMs: 5_000 }),
    ).rejects.toBeInstanceOf(RedisUnavailableError);
    expect(await answered(() => holder.isHeld())).toBe(true);
    const { line } = semaphoreRedisKeys(prefix, 'w');
    expect(await admin.zcard(line)).toBe(0);
    expect(await holder.release()).toBe(true);
    // Before: null, the permit handed to the token of the caller that was told it failed.
    const next = await semaphores.tryAcquire('w', { limit: 1 });
    expect(next).not.toBeNull();
  });

  it('after a SCRIPT FLUSH on a live connection: the late reply of the attempt gives its permits back again', async () => {
    // The acquire script was sent on this connection (EVALSHA next time), leave-line never was
    // (EVAL): after the flush, the attempt's NOSCRIPT fallback reaches Redis after its undo.
    const warm: Permit = await semaphores.acquire('warm', { limit: 1, ttlMs: 20_000 });
    await admin.script('FLUSH');
    await admin.client('PAUSE', 600, 'ALL');
    await expect(semaphores.acquire('flushed', { limit: 1, ttlMs: 20_000 })).rejects.toBeInstanceOf(
      RedisUnavailableError,
    );
    // That first answer may precede the attempt's late reply (both were sent again after their
    // NOSCRIPT, the attempt first); a call made after it is sent behind the second undo.
    await (await answered(() => semaphores.tryAcquire('flushed', { limit: 1 })))?.release();
    // Before: null, the permit held by the failed attempt's token for its 20 s.
    expect(await semaphores.tryAcquire('flushed', { limit: 1 })).not.toBeNull();
    await warm.release();
  });
});
