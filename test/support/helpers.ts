import { randomBytes } from 'node:crypto';
import { Test } from '@nestjs/testing';
import type { INestApplicationContext, Provider } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  QueueService,
  RedisLockModule,
  type QueueStats,
  type RedisLockModuleOptions,
} from '../../lib';
import { lockRedisKeys } from '../../lib/lock/lock-keys';

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

/**
 * A Nest application context with `RedisLockModule.forRoot(options)` on the test server, and
 * `providers` beside it.
 */
export async function createLockApp(
  options: RedisLockModuleOptions = {},
  providers: Provider[] = [],
): Promise<INestApplicationContext> {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), ...options })],
    providers,
  }).compile();
  return moduleRef.init();
}

/**
 * For a `describe` block whose tests enqueue and look at Redis from outside (e.g. beside worker
 * processes): a `createLockApp` with key prefix `prefix` and a `redisClient`, opened before its
 * tests and closed after them. Read `queues` and `redis` inside the tests.
 */
export function queueAppAndClient(prefix: string): { queues: QueueService; redis: Redis } {
  let app: INestApplicationContext | undefined;
  let queues: QueueService | undefined;
  let redis: Redis | undefined;
  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app?.close();
    redis?.disconnect();
  });
  return {
    get queues() {
      return queues!;
    },
    get redis() {
      return redis!;
    },
  };
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

/** A promise with its resolve and reject functions, for the test to settle by hand. */
export interface Deferred<T> {
  readonly promise: Promise<T>;
  readonly resolve: (value: T) => void;
  readonly reject: (reason: unknown) => void;
}

/** A promise the test settles by hand (e.g. to let a handler run until the test says so). */
export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** How `p` ended, as one comparable string: `granted`, or the error's `name: message`. */
export function settledAs(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => 'granted',
    (err: Error) => `${err.name}: ${err.message}`,
  );
}

/** Calls per command on `client`'s server since it started or CONFIG RESETSTAT (INFO commandstats). */
export async function commandCalls(client: Redis): Promise<Map<string, number>> {
  const info = await client.info('commandstats');
  const calls = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1], Number(m[2]));
  return calls;
}

/**
 * Script calls (EVALSHA + EVAL) among `calls`: a connection's first call of a script is an EVAL,
 * the later ones EVALSHA.
 */
export function scriptsIn(calls: Map<string, number>): number {
  return (calls.get('evalsha') ?? 0) + (calls.get('eval') ?? 0);
}

/** Script calls (EVALSHA + EVAL) `client`'s server has run so far. */
export async function scriptCalls(client: Redis): Promise<number> {
  return scriptsIn(await commandCalls(client));
}

/** Clients blocked in a blocking command (e.g. an idle worker's BLPOP) on `client`'s server. */
export async function blockedClients(client: Redis): Promise<number> {
  return Number(/blocked_clients:(\d+)/.exec(await client.info('clients'))![1]);
}

/** The clock of `client`'s server (Redis TIME), in ms. */
export async function redisTimeMs(client: Redis): Promise<number> {
  const [s, us] = await client.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/**
 * Waits until exactly `n` fair waiters stand in the line of lock `name` (keys under `prefix`),
 * read through `client`: a waiter in line is surely waiting.
 */
/** Waits until `n` callers of `locks` wait in its local cohort for lock `name`. */
export function waitForLocalWaiters(
  locks: { localWaiters(key: string): number },
  name: string,
  n = 1,
  timeoutMs = 5_000,
): Promise<void> {
  return waitFor(
    `${n} local waiter(s) for lock '${name}'`,
    async () => locks.localWaiters(name) === n,
    timeoutMs,
  );
}

export function waitForLine(
  client: Redis,
  prefix: string,
  name: string,
  n = 1,
  timeoutMs = 5_000,
): Promise<void> {
  const line = lockRedisKeys(prefix, name).line;
  return waitFor(
    `${n} waiter(s) in the line of lock '${name}'`,
    async () => (await client.zcard(line)) === n,
    timeoutMs,
  );
}

/**
 * What `QueueService.stats` returns for a queue with only the given counts (the rest 0, not
 * paused), for `toMatchObject`: `completed` and `cancelled` are left out unless given (completed
 * tasks are kept by default).
 */
export function queueStats(counts: Partial<QueueStats> = {}): Partial<QueueStats> {
  return { ready: 0, delayed: 0, leased: 0, dead: 0, paused: false, waitingChildren: 0, ...counts };
}
