import 'reflect-metadata';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import {
  FencedStore,
  Lock,
  LockKeyError,
  LockKeyValueInvalidError,
  LockKeyValueMissingError,
  LockService,
  PayloadTooLargeError,
  QueueError,
  QueueService,
  RedisLockError,
  RedisLockModule,
  RedisLockOptionsError,
  WithLock,
} from '../../lib';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import { commandCalls, redisClient, uniquePrefix, scriptsIn } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';
import {
  badCount,
  badDelay,
  badInt,
  badKeyArgument,
  badLeasedTask,
  badLockKey,
  badLockOptions,
  badLockTtl,
  badMaxAttempts,
  badModuleOptions,
  badName,
  badPayload,
  badTaskId,
  badTemplate,
  badTimerMs,
  notABoolean,
  notAnObject,
  unknownOption,
  withOption,
} from './support/bad-inputs';
import { reportFaults } from './support/fault-report';
import { PROFILE, PROFILE_NAME } from './support/profile';

const RUNS = PROFILE.badInput.runsPerFamily;
/** A call that has not settled by then counts as hung. */
const HANG_MS = 5_000;

type ErrorClass =
  | typeof LockKeyError
  | typeof LockKeyValueMissingError
  | typeof LockKeyValueInvalidError
  | typeof RedisLockOptionsError
  | typeof QueueError
  | typeof PayloadTooLargeError;

/** One invalid call and what it must reject with. */
interface BadCall {
  what: string;
  call: () => unknown;
  expected: ErrorClass;
  /** The option (`RedisLockOptionsError.option`) or argument (`QueueError.argument`) it names. */
  names?: string;
}

@Injectable()
class Decorated {
  @WithLock('item:<0>')
  async one(_item: unknown) {
    return 'ran';
  }

  @WithLock(['order:<0.id>', 'customer:<1>'])
  async two(_order: unknown, _customer: unknown) {
    return 'ran';
  }

  @WithLock((key: unknown) => key as string)
  async byFunction(_key: unknown) {
    return 'ran';
  }
}

const describeValue = (v: unknown) => {
  try {
    return typeof v === 'symbol' || typeof v === 'function' || typeof v === 'bigint'
      ? String(v)
      : (JSON.stringify(v) ?? String(v)).slice(0, 60);
  } catch {
    return Object.prototype.toString.call(v);
  }
};

// "None leaves an unhandled rejection": Jest fails the running test on any unhandled rejection
// (checked: a planted `void Promise.reject(...)` fails the suite), so every property below would
// fail had one of its calls left one behind.
describe(`Fault: bad input fuzz (fast-check, ${RUNS} runs per call family, profile ${PROFILE_NAME})`, () => {
  const prefix = uniquePrefix('faults-fuzz');
  let server: RedisServer;
  let redis: Redis;
  let app: INestApplicationContext;
  let locks: LockService;
  let queues: QueueService;
  let store: FencedStore;
  let decorated: Decorated;
  let held: Lock;
  let before: Map<string, number>;
  let keysBefore: number;
  const tally = { calls: 0, hung: 0, wrong: 0, slowestMs: 0 };

  /** Runs `c` against a deadline; throws unless it rejected with the expected typed error. */
  const expectTypedRejection = async (c: BadCall) => {
    tally.calls++;
    let timer: NodeJS.Timeout | undefined;
    const started = Date.now();
    const outcome = await Promise.race([
      Promise.resolve()
        .then(c.call)
        .then(
          (value) => ({ kind: 'resolved' as const, value }),
          (error: unknown) => ({ kind: 'rejected' as const, error }),
        ),
      new Promise<{ kind: 'hung' }>((resolve) => {
        timer = setTimeout(() => resolve({ kind: 'hung' }), HANG_MS);
      }),
    ]);
    clearTimeout(timer);
    tally.slowestMs = Math.max(tally.slowestMs, Date.now() - started);
    if (outcome.kind === 'hung') {
      tally.hung++;
      throw new Error(`${c.what}: still pending after ${HANG_MS} ms`);
    }
    if (outcome.kind === 'resolved') {
      tally.wrong++;
      throw new Error(`${c.what}: resolved with ${describeValue(outcome.value)}`);
    }
    const err = outcome.error;
    const ok =
      err instanceof c.expected &&
      err instanceof RedisLockError &&
      err.name === c.expected.name &&
      err.message.length > 0 &&
      (c.names === undefined ||
        (err instanceof RedisLockOptionsError && err.option === c.names) ||
        (err instanceof QueueError && err.argument === c.names));
    if (!ok) {
      tally.wrong++;
      throw new Error(
        `${c.what}: expected ${c.expected.name}${c.names === undefined ? '' : ` naming '${c.names}'`}, ` +
          `got ${(err as Error)?.name}: ${(err as Error)?.message}`,
      );
    }
  };

  const check = (arbitrary: fc.Arbitrary<BadCall>) =>
    fc.assert(fc.asyncProperty(arbitrary, expectTypedRejection), { numRuns: RUNS });

  beforeAll(async () => {
    server = await startRedisServer();
    redis = redisClient(server.url);
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: server.url, keyPrefix: prefix })],
      providers: [Decorated],
    }).compile();
    app = await moduleRef.init();
    locks = app.get(LockService);
    queues = app.get(QueueService);
    store = app.get(FencedStore);
    decorated = app.get(Decorated);
    held = await locks.acquire('held', { ttlMs: 600_000 });
    keysBefore = await redis.dbsize();
    before = await commandCalls(redis);
  });
  afterAll(async () => {
    await held.release();
    await app.close();
    redis.disconnect();
    await server.stop();
  });

  const lockMethods = {
    acquire: (key: unknown, o?: unknown) => locks.acquire(key as string, o as never),
    tryAcquire: (key: unknown, o?: unknown) => locks.tryAcquire(key as string, o as never),
    withLock: (key: unknown, o?: unknown) => locks.withLock(key as string, () => 'ran', o as never),
    isLocked: (key: unknown, o?: unknown) => locks.isLocked(key as string, o as never),
  };

  it('LockService: invalid keys reject with LockKeyError', () =>
    check(
      fc
        .tuple(
          fc.constantFrom(...Object.keys(lockMethods), 'release', 'extend', 'isHeld'),
          badLockKey,
        )
        .map(([method, key]) => ({
          what: `locks.${method}(${describeValue(key)})`,
          call: () =>
            method === 'release'
              ? locks.release(key as string)
              : method === 'extend'
                ? locks.extend(key as string, 1_000)
                : method === 'isHeld'
                  ? locks.isHeld(key as string)
                  : lockMethods[method as keyof typeof lockMethods](key),
          expected: LockKeyError,
        })),
    ));

  it('LockService: invalid options (types, NaN, negative, Infinity, unknown names) reject with RedisLockOptionsError naming the option', () =>
    check(
      fc
        .tuple(fc.constantFrom(...Object.keys(lockMethods)), badLockOptions)
        .map(([method, { option, options }]) => ({
          what: `locks.${method}('k', ${describeValue(options)})`,
          call: () => lockMethods[method as keyof typeof lockMethods]('k', options),
          expected: RedisLockOptionsError,
          names: option,
        })),
    ));

  it('LockService.extend / Lock.extend: an invalid TTL for a held lock rejects with RedisLockOptionsError', () =>
    check(
      fc.tuple(fc.boolean(), badLockTtl).map(([viaService, ttl]) => ({
        what: `${viaService ? 'locks.extend(lock, ' : 'lock.extend('}${describeValue(ttl)})`,
        call: () => (viaService ? locks.extend(held, ttl as number) : held.extend(ttl as number)),
        expected: RedisLockOptionsError,
        names: 'ttlMs',
      })),
    ));

  it('QueueService: invalid queue names reject with QueueError naming the queue', () =>
    check(
      fc
        .tuple(
          fc.constantFrom<Array<[string, (q: string) => unknown]>>(
            ['enqueue', (q) => queues.enqueue(q, 'id')],
            ['pop', (q) => queues.pop(q)],
            ['top', (q) => queues.top(q)],
            ['dequeue', (q) => queues.dequeue(q, 'id', 1)],
            ['claim', (q) => queues.claim(q)],
            ['stats', (q) => queues.stats(q)],
            ['deadLetters', (q) => queues.deadLetters(q)],
            ['requeueDead', (q) => queues.requeueDead(q)],
            ['process', (q) => queues.process(q, () => undefined)],
          ),
          badName(512),
        )
        .map(([[method, call], queue]) => ({
          what: `queues.${method}(${describeValue(queue)})`,
          call: () => call(queue as string),
          expected: QueueError,
          names: 'queue',
        })),
    ));

  it('QueueService: invalid ids, counts, delays, scores, payloads, tasks and options reject with the documented error', () => {
    const task = { queue: 'q', id: 'a', leaseToken: 't', score: 0, attempt: 1 } as never;
    const enqueueKeys = ['delayMs', 'payload', 'replace'];
    const claimKeys = ['leaseMs', 'maxAttempts'];
    const calls: fc.Arbitrary<BadCall> = fc.oneof(
      badTaskId.map((id) => ({
        what: `enqueue('q', ${describeValue(id)})`,
        call: () => queues.enqueue('q', id as string),
        expected: QueueError,
        names: 'id',
      })),
      fc
        .oneof(
          fc.constant([]),
          fc.constant(Array.from({ length: 1_001 }, (_, i) => i)),
          badTaskId.map((id) => ['ok', id]),
        )
        .map((ids) => ({
          what: `enqueue('q', ${describeValue(ids)})`,
          call: () => queues.enqueue('q', ids as string[]),
          expected: QueueError,
          names: 'ids',
        })),
      badDelay.map((delayMs) => ({
        what: `enqueue('q', 'a', { delayMs: ${describeValue(delayMs)} })`,
        call: () => queues.enqueue('q', 'a', { delayMs: delayMs as number }),
        expected: QueueError,
        names: 'delayMs',
      })),
      notABoolean.map((replace) => ({
        what: `enqueue('q', 'a', { replace: ${describeValue(replace)} })`,
        call: () => queues.enqueue('q', 'a', { replace: replace as boolean }),
        expected: QueueError,
        names: 'replace',
      })),
      badPayload.map((payload) => ({
        what: `enqueue('q', 'a', { payload: ${describeValue(payload)} })`,
        call: () => queues.enqueue('q', 'a', { payload }),
        expected: QueueError,
        names: 'payload',
      })),
      // JSON text past the default maxPayloadBytes (1 MiB): from one byte over to 4 MiB.
      fc.integer({ min: 1_048_575, max: 4_194_304 }).map((chars) => ({
        what: `enqueue('q', 'a', { payload: <a string of ${chars} characters> })`,
        call: () => queues.enqueue('q', 'a', { payload: 'x'.repeat(chars) }),
        expected: PayloadTooLargeError,
        names: 'payload',
      })),
      fc.tuple(unknownOption(enqueueKeys), fc.anything()).map(([k, v]) => ({
        what: `enqueue('q', 'a', { ${k}: … })`,
        call: () => queues.enqueue('q', 'a', withOption(k, v) as never),
        expected: QueueError,
        names: k,
      })),
      notAnObject.map((o) => ({
        what: `enqueue('q', 'a', ${describeValue(o)})`,
        call: () => queues.enqueue('q', 'a', o as never),
        expected: QueueError,
        names: 'options',
      })),
      fc
        .tuple(fc.constantFrom('pop', 'top', 'claim', 'deadLetters'), badCount)
        .map(([method, count]) => ({
          what: `${method}('q', ${describeValue(count)})`,
          call: () =>
            (queues[method as 'pop'] as (q: string, n: unknown) => Promise<unknown>).call(
              queues,
              'q',
              count,
            ),
          expected: QueueError,
          names: 'count',
        })),
      fc
        .oneof(
          badTaskId.map((id) => ({ id, score: 1, names: 'id' })),
          fc
            .oneof(fc.constantFrom(NaN, Infinity, -Infinity, undefined), fc.string(), fc.object())
            .map((score) => ({ id: 'a', score, names: 'score' })),
        )
        .map(({ id, score, names }) => ({
          what: `dequeue('q', ${describeValue(id)}, ${describeValue(score)})`,
          call: () => queues.dequeue('q', id as string, score as number),
          expected: QueueError,
          names,
        })),
      fc
        .oneof(
          badTimerMs(1).map((v) => ({ names: 'leaseMs', options: { leaseMs: v } })),
          badMaxAttempts.map((v) => ({ names: 'maxAttempts', options: { maxAttempts: v } })),
          fc
            .tuple(unknownOption(claimKeys), fc.anything())
            .map(([k, v]) => ({ names: k, options: withOption(k, v) })),
          notAnObject.map((options) => ({ names: 'options', options })),
        )
        .map(({ names, options }) => ({
          what: `claim('q', 1, ${describeValue(options)})`,
          call: () => queues.claim('q', 1, options as never),
          expected: QueueError,
          names,
        })),
      fc
        .tuple(fc.constantFrom('ack', 'nack', 'extendLease', 'release'), badLeasedTask)
        .map(([method, bad]) => ({
          what: `${method}(${describeValue(bad)})`,
          call: () =>
            method === 'extendLease'
              ? queues.extendLease(bad as never, 1_000)
              : (queues[method as 'ack'] as (t: unknown) => Promise<unknown>).call(queues, bad),
          expected: QueueError,
          names: 'task',
        })),
      fc
        .oneof(
          badDelay.map((v) => ({ names: 'delayMs', options: { delayMs: v } })),
          badMaxAttempts.map((v) => ({ names: 'maxAttempts', options: { maxAttempts: v } })),
          fc
            .tuple(unknownOption(claimKeys.concat('delayMs')), fc.anything())
            .map(([k, v]) => ({ names: k, options: withOption(k, v) })),
        )
        .map(({ names, options }) => ({
          what: `nack(task, ${describeValue(options)})`,
          call: () => queues.nack(task, options as never),
          expected: QueueError,
          names,
        })),
      badTimerMs(1).map((ms) => ({
        what: `extendLease(task, ${describeValue(ms)})`,
        call: () => queues.extendLease(task, ms as number),
        expected: QueueError,
        names: 'ms',
      })),
      fc
        .oneof(
          fc.constantFrom(null, undefined, 'handler', 1, {}),
          fc.array(fc.integer(), { maxLength: 2 }),
        )
        .map((handler) => ({
          what: `process('q', ${describeValue(handler)})`,
          call: () => queues.process('q', handler as never),
          expected: QueueError,
          names: 'handler',
        })),
      fc
        .oneof(
          badInt(1, 10_000).map((v) => ({ names: 'concurrency', options: { concurrency: v } })),
          badTimerMs(1).map((v) => ({ names: 'leaseMs', options: { leaseMs: v } })),
          badMaxAttempts.map((v) => ({ names: 'maxAttempts', options: { maxAttempts: v } })),
          badTimerMs(0).map((v) => ({ names: 'backoffMs', options: { backoffMs: v } })),
          badTimerMs(0).map((v) => ({ names: 'drainTimeoutMs', options: { drainTimeoutMs: v } })),
          fc
            .tuple(
              unknownOption([
                'concurrency',
                'leaseMs',
                'maxAttempts',
                'backoffMs',
                'drainTimeoutMs',
              ]),
              fc.anything(),
            )
            .map(([k, v]) => ({ names: k, options: withOption(k, v) })),
          notAnObject.map((options) => ({ names: '', options })),
        )
        .map(({ names, options }) => ({
          what: `process('q', handler, ${describeValue(options)})`,
          call: () => queues.process('q', () => undefined, options as never),
          // Worker options are options: RedisLockOptionsError, as for @QueueWorker.
          expected: RedisLockOptionsError,
          names,
        })),
    );
    return check(calls);
  });

  it('@WithLock: invalid templates and options throw when decorating; invalid arguments reject at call time', () => {
    // A value missing from the arguments is the caller's (HTTP 400), and so is one that makes the
    // key (`literal` + the value) too long or is not well-formed; any other bad one a LockKeyError.
    const keyErrorOf = (value: unknown, literal: string) => {
      if (value === undefined || value === null || value === '') return LockKeyValueMissingError;
      const text =
        typeof value === 'string' ||
        typeof value === 'bigint' ||
        typeof value === 'boolean' ||
        (typeof value === 'number' && Number.isFinite(value))
          ? String(value)
          : undefined;
      if (text !== undefined && (Buffer.byteLength(literal + text) > 512 || /\p{Cs}/u.test(text))) {
        return LockKeyValueInvalidError;
      }
      return LockKeyError;
    };
    const decorate = (key: unknown, options?: unknown) => {
      const descriptor = { value: (_a: unknown) => 'ran', configurable: true, writable: true };
      WithLock(key as string, options as never)({}, 'method', descriptor);
    };
    const calls: fc.Arbitrary<BadCall> = fc.oneof(
      badTemplate.map((template) => ({
        what: `@WithLock(${describeValue(template)})`,
        call: () => decorate(template),
        expected: LockKeyError,
      })),
      badLockOptions.map(({ option, options }) => ({
        what: `@WithLock('k', ${describeValue(options)})`,
        call: () => decorate('k', options),
        expected: RedisLockOptionsError,
        names: option,
      })),
      badKeyArgument.map((arg) => ({
        what: `@WithLock('item:<0>') one(${describeValue(arg)})`,
        call: () => decorated.one(arg),
        expected: keyErrorOf(arg, 'item:'),
      })),
      fc.tuple(fc.boolean(), badKeyArgument).map(([nested, arg]) => ({
        what: `@WithLock(['order:<0.id>', 'customer:<1>']) two(${nested ? `{ id: ${describeValue(arg)} }` : describeValue(arg)}, 'c')`,
        call: () => decorated.two(nested ? { id: arg } : arg, 'c'),
        expected: keyErrorOf(
          nested || arg === null || arg === undefined ? arg : (arg as any).id,
          'order:',
        ),
      })),
      badKeyArgument.map((arg) => ({
        what: `@WithLock((k) => k) byFunction(${describeValue(arg)})`,
        call: () => decorated.byFunction(arg),
        expected: LockKeyError,
      })),
    );
    return check(calls);
  });

  it('RedisLockModule.forRoot / forRootAsync: invalid module options reject with RedisLockOptionsError naming the option', () =>
    check(
      fc.tuple(fc.boolean(), badModuleOptions).map(([async, { option, options }]) => {
        const all = { redis: server.url, ...options };
        return {
          what: `RedisLockModule.${async ? 'forRootAsync' : 'forRoot'}(${describeValue(options)})`,
          call: async () => {
            const moduleRef = await Test.createTestingModule({
              imports: [
                async
                  ? RedisLockModule.forRootAsync({ useFactory: async () => all as never })
                  : RedisLockModule.forRoot(all as never),
              ],
            })
              .setLogger({ log() {}, error() {}, warn() {} })
              .compile();
            // Reached only when the options were (wrongly) accepted: do not leak the app.
            await moduleRef.close();
            return 'compiled';
          },
          expected: RedisLockOptionsError,
          names: option,
        };
      }),
    ));

  it('FencedStore: invalid resources, fences and values reject with LockKeyError / RedisLockOptionsError', () =>
    check(
      fc.oneof(
        fc
          .tuple(fc.constantFrom('write', 'read', 'check'), badName(512))
          .map(([method, resource]) => ({
            what: `fenced.${method}(${describeValue(resource)})`,
            call: () =>
              method === 'write'
                ? store.write(resource as string, 1, 'v')
                : method === 'read'
                  ? store.read(resource as string)
                  : store.check(resource as string, 1),
            expected: LockKeyError,
          })),
        fc
          .tuple(
            fc.boolean(),
            fc.oneof(badInt(1, Number.MAX_SAFE_INTEGER), fc.constantFrom(0, undefined)),
          )
          .map(([write, fence]) => ({
            what: `fenced.${write ? 'write' : 'check'}('r', ${describeValue(fence)})`,
            call: () =>
              write ? store.write('r', fence as number, 'v') : store.check('r', fence as number),
            expected: RedisLockOptionsError,
            names: 'fence',
          })),
        fc
          .oneof(
            fc.constantFrom(undefined, null, 1, true, Symbol('v'), 10n),
            fc.object({ maxDepth: 1 }),
          )
          .map((value) => ({
            what: `fenced.write('r', 1, ${describeValue(value)})`,
            call: () => store.write('r', 1, value as never),
            expected: RedisLockOptionsError,
            names: 'value',
          })),
      ),
    ));

  it('none of them reached Redis: no command at all ran on the server, no key was written', async () => {
    const after = await commandCalls(redis);
    const ran: Record<string, number> = {};
    for (const [command, calls] of after) {
      const extra = calls - (before.get(command) ?? 0);
      if (extra > 0) ran[command] = extra;
    }
    const keysAfter = await redis.dbsize();
    // Commands other than the INFO that took the first snapshot.
    const reached = Object.entries(ran).filter(([c, n]) => !(c === 'info' && n === 1));
    // Reported before the checks, so that a failing run reports what it found too.
    reportFaults({
      scenario: '5 bad input fuzz',
      operations: tally.calls,
      faults: tally.calls,
      violations: tally.hung + tally.wrong + reached.length + (keysAfter === keysBefore ? 0 : 1),
      longestUnavailabilityMs: tally.slowestMs,
      note:
        `8 call families, ${RUNS} fast-check runs each; all rejected with the documented typed ` +
        `error, none hung, no Redis command ran, no unhandled rejection; longest = slowest rejection`,
    });

    // Only the INFO that took the first snapshot.
    expect(ran).toEqual({ info: 1 });
    expect(keysAfter).toBe(keysBefore);
    expect(tally.calls).toBeGreaterThanOrEqual(1_000);
    expect(tally.hung + tally.wrong).toBe(0);
  });

  it('the detector works: a valid call does show up in the command stats', async () => {
    const start = await commandCalls(redis);
    expect(await locks.tryAcquire('control', { ttlMs: 1_000 })).not.toBeNull();
    const end = await commandCalls(redis);
    expect(scriptsIn(end) - scriptsIn(start)).toBeGreaterThanOrEqual(1);
  });

  describe('bugs this suite found (fixed)', () => {
    it('withLock with a callback that is not a function rejects with a typed error before taking the lock', async () => {
      const fenceKey = lockRedisKeys(prefix, 'not-a-function').fence;
      const before = await redis.get(fenceKey);
      const err = await locks.withLock('not-a-function', undefined as never).catch((e) => e);
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      // Was: TypeError 'fn is not a function', after the lock was taken (fence incremented).
      expect(await redis.get(fenceKey)).toBe(before);
      expect(await redis.exists(`${prefix}lock:{not-a-function}`)).toBe(0);
    });

    it('extend of a key this instance does not hold rejects an invalid TTL like extend of a held lock', async () => {
      // Was: resolved false without looking at the TTL.
      await expect(locks.extend('not-held', NaN)).rejects.toBeInstanceOf(RedisLockOptionsError);
    });
  });
});
