import 'reflect-metadata';
import type { ChildProcess } from 'node:child_process';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { lastValueFrom, Observable, of, toArray } from 'rxjs';
import { LockService, RedisLockOptionsError, WithLock } from '../../lib';
import { exited, lineFrom, spawnTs } from '../support/child';
import { createLockApp, redisClient, testRedisUrl, uniquePrefix } from '../support/helpers';

/** Everything a child wrote, stdout and stderr together. */
function output(child: ChildProcess): () => string {
  let text = '';
  child.stdout!.on('data', (chunk: Buffer) => (text += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return () => text;
}

@Injectable()
class Streams {
  calls = 0;

  @WithLock('stream', { skipIfLocked: true })
  values(): Observable<number> {
    this.calls++;
    return of(1, 2);
  }
}

describe('skipIfLocked', () => {
  const prefix = uniquePrefix('skip-if-locked');
  let redis: Redis;
  let app: INestApplicationContext;

  beforeAll(async () => {
    redis = redisClient();
    app = await createLockApp({ keyPrefix: prefix }, [Streams]);
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  it('concurrent calls from 2 instances: one runs, the other resolves undefined at once, nothing logged as an error', async () => {
    const env = { REDIS_URL: testRedisUrl(), PREFIX: prefix, NO_COLOR: '1' };
    const children = [0, 1].map(() => spawnTs('test/fixtures/skip-if-locked-child.ts', [], env));
    const logs = children.map(output);
    await Promise.all(children.map((c) => lineFrom(c, /^ready$/, 60_000)));
    // Listening before the calls: a child prints its result and exits at once.
    const running = Promise.any(
      children.map((c, i) => lineFrom(c, /^running$/, 60_000).then(() => i)),
    );
    const results = children.map((c) => lineFrom(c, /^result /, 60_000));
    await redis.rpush(`${prefix}go`, 'go', 'go');
    const winner = await running;
    // The loser answers while the winner still holds the lock (the gate is still shut).
    expect(await results[1 - winner]).toBe('result undefined');
    await redis.rpush(`${prefix}gate`, 'open');
    expect(await results[winner]).toBe(`result "ran by ${children[winner].pid}"`);
    await Promise.all(children.map(exited));

    expect(logs[1 - winner]()).toMatch(
      /DEBUG \[LockService\] skipped \(skipIfLocked\): lock 'report'/,
    );
    for (const log of logs) {
      expect(log()).not.toMatch(/ERROR|LockTimeoutError/);
      expect(log()).toMatch(/LOG \[InstanceLoader\]/);
    }
  }, 120_000);

  it('withLock: the callback is not called and the call resolves undefined', async () => {
    const locks = app.get(LockService);
    const held = await locks.acquire('busy');
    const fn = jest.fn(() => 'ran');
    await expect(locks.withLock('busy', fn, { skipIfLocked: true })).resolves.toBeUndefined();
    expect(fn).not.toHaveBeenCalled();
    await held.release();
    await expect(locks.withLock('busy', fn, { skipIfLocked: true })).resolves.toBe('ran');
  });

  it('a method declared to return an Observable completes without a value and is not called', async () => {
    const locks = app.get(LockService);
    const streams = app.get(Streams);
    const held = await locks.acquire('stream');
    await expect(lastValueFrom(streams.values().pipe(toArray()))).resolves.toEqual([]);
    expect(streams.calls).toBe(0);
    await held.release();
    await expect(lastValueFrom(streams.values().pipe(toArray()))).resolves.toEqual([1, 2]);
    expect(streams.calls).toBe(1);
  });

  it('rejects a non-boolean skipIfLocked naming the option', async () => {
    const locks = app.get(LockService);
    await expect(
      locks.withLock('x', () => 1, { skipIfLocked: 'yes' as unknown as boolean }),
    ).rejects.toThrow(RedisLockOptionsError);
    expect(() => WithLock('x', { skipIfLocked: 1 as unknown as boolean })).toThrow(/skipIfLocked/);
  });
});
