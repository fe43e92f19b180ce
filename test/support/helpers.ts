import { randomBytes } from 'node:crypto';
import { Test } from '@nestjs/testing';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { RedisLockModule, type RedisLockModuleOptions } from '../../lib';

/** URL of the redis-server started by the global setup. */
export function testRedisUrl(): string {
  const url = process.env.REDIS_LOCK_TEST_URL;
  if (!url)
    throw new Error('REDIS_LOCK_TEST_URL is not set: run the tests with jest (global setup)');
  return url;
}

/** A key prefix no other test (file or case) uses. */
export function uniquePrefix(name: string): string {
  return `t:${name}:${randomBytes(4).toString('hex')}:`;
}

/** A plain client on the test server, for looking at and changing Redis from outside. */
export function redisClient(url = testRedisUrl()): Redis {
  return new Redis(url, { maxRetriesPerRequest: 1 });
}

/** A Nest application context with `RedisLockModule.forRoot(options)` on the test server. */
export async function createLockApp(
  options: RedisLockModuleOptions = {},
): Promise<INestApplicationContext> {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), ...options })],
  }).compile();
  return moduleRef.init();
}

/** Polls `condition` every `intervalMs` until it holds; throws with `what` after `timeoutMs`. */
export async function waitFor(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
  intervalMs = 5,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Resolves after `ms` (for holding a lock in a test, never for "letting things settle"). */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
