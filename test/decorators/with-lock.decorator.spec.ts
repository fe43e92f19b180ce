import 'reflect-metadata';
import { Injectable, Module, Scope, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import { lastValueFrom, Observable, Subject, type Subscription } from 'rxjs';
import {
  LockKeyError,
  LockLostError,
  LockService,
  LockTimeoutError,
  RedisLockError,
  RedisLockModule,
  RedisLockOptionsError,
  RateLimit,
  RequiresPass,
  WithLock,
  WithSemaphore,
} from '../../lib';
import { OncePerTick } from '../../lib/schedule';
import {
  deferred,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitFor,
  waitForLocalWaiters,
  type Deferred,
} from '../support/helpers';

interface TransferCommand {
  from: string;
  to: string;
}

@Injectable()
class StockService {
  readonly log: string[] = [];
  /** Promises the test resolves by hand: a locked method waits on its caller's until then. */
  readonly gates = new Map<string, Deferred<void>>();
  calls = 0;

  constructor(readonly locks: LockService) {}

  gate(name: string): Deferred<void> {
    const gate = deferred();
    this.gates.set(name, gate);
    return gate;
  }

  @WithLock('stock:<0>', { waitMs: 5_000 })
  async reserve(sku: string, caller: string): Promise<string> {
    this.log.push(`start ${caller}`);
    await this.gates.get(caller)?.promise;
    this.log.push(`end ${caller}`);
    return `${caller} reserved ${sku}`;
  }

  @WithLock(['account:<0.from>', 'account:<0.to>'])
  async transfer(cmd: TransferCommand): Promise<readonly string[] | undefined> {
    void cmd;
    return this.locks.currentLock()?.keys;
  }

  @WithLock(function (this: StockService, order: { id: number }) {
    this.calls++;
    return `order:${order.id}`;
  })
  async settle(order: { id: number }): Promise<string | undefined> {
    void order;
    return this.locks.currentLock()?.keys[0];
  }

  @WithLock('order:<0.id>')
  async ship(order: { id?: number }): Promise<void> {
    this.calls++;
    void order;
  }

  @WithLock('fail:<0>')
  async failAsync(id: string): Promise<never> {
    throw new Error(`async failure ${id}`);
  }

  @WithLock('fail:<0>')
  failSync(id: string): Promise<never> {
    throw new Error(`sync failure ${id}`);
  }

  @WithLock('ttl:<0>', { ttlMs: 5_000 })
  async ttlOf(key: string, redis: Redis, prefix: string): Promise<number> {
    return redis.pttl(`${prefix}lock:{ttl:${key}}`);
  }

  @WithLock('default-ttl:<0>')
  async defaultTtlOf(key: string, redis: Redis, prefix: string): Promise<number> {
    return redis.pttl(`${prefix}lock:{default-ttl:${key}}`);
  }

  @WithLock('short:<0>', { ttlMs: 200, autoExtend: false })
  async untilLost(id: string): Promise<unknown> {
    const lock = this.locks.currentLock(`short:${id}`);
    if (!lock) throw new Error('no current lock');
    return new Promise((resolve) =>
      lock.signal.addEventListener('abort', () => resolve(lock.signal.reason)),
    );
  }

  @WithLock('nest:<0>')
  async outer(id: string): Promise<string> {
    this.log.push('outer start');
    const inner = await this.inner(id, 'outer');
    this.log.push('outer end');
    return inner;
  }

  @WithLock('nest:<0>', { waitMs: 5_000 })
  async inner(id: string, caller: string): Promise<string> {
    this.log.push(`inner ${caller} start`);
    await this.gates.get(`inner ${caller}`)?.promise;
    this.log.push(`inner ${caller} end`);
    return `inner ${caller} under ${this.locks.currentLock()?.keys.join()}`;
  }
}

@Injectable()
class FeedService {
  readonly feeds = new Map<string, Subject<number>>();
  /** Ids whose `watch` ran (inside the lock). */
  readonly watching = new Set<string>();

  feed(id: string): Subject<number> {
    const subject = new Subject<number>();
    this.feeds.set(id, subject);
    return subject;
  }

  /** Declared to return an Observable: the lock is taken on subscription. */
  @WithLock('feed:<0>')
  watch(id: string): Observable<number> {
    this.watching.add(id);
    return this.feeds.get(id)!.asObservable();
  }

  /** An async method that turns out to return an Observable: the lock is held until it ends. */
  @WithLock('later:<0>', { ttlMs: 1_000 })
  async watchLater(id: string): Promise<Observable<number>> {
    return this.feeds.get(id)!.asObservable();
  }
}

describe('@WithLock', () => {
  const prefix = uniquePrefix('with-lock');
  let app: INestApplicationContext;
  let stock: StockService;
  let feeds: FeedService;
  let locks: LockService;
  let redis: Redis;
  const isLocked = (name: string) => locks.isLocked(name);

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefix, ttlMs: 7_000 }),
      ],
      providers: [StockService, FeedService],
    }).compile();
    app = await moduleRef.init();
    stock = app.get(StockService);
    feeds = app.get(FeedService);
    locks = app.get(LockService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });
  beforeEach(() => {
    stock.log.length = 0;
    stock.gates.clear();
    stock.calls = 0;
  });

  describe('locking', () => {
    it('serializes two concurrent calls on the same key, in arrival order', async () => {
      const first = stock.gate('first');
      const a = stock.reserve('sku-1', 'first');
      await waitFor('first call to run', () => stock.log.includes('start first'));
      const b = stock.reserve('sku-1', 'second');
      // The second caller waits behind the first in this instance's local cohort.
      await waitForLocalWaiters(locks, 'stock:sku-1');
      expect(stock.log).toEqual(['start first']);
      first.resolve();
      expect(await Promise.all([a, b])).toEqual(['first reserved sku-1', 'second reserved sku-1']);
      expect(stock.log).toEqual(['start first', 'end first', 'start second', 'end second']);
      expect(await isLocked('stock:sku-1')).toBe(false);
    });

    it('lets calls on different keys overlap', async () => {
      const first = stock.gate('first');
      const second = stock.gate('second');
      const a = stock.reserve('sku-a', 'first');
      const b = stock.reserve('sku-b', 'second');
      await waitFor(
        'both calls to run',
        () => stock.log.includes('start first') && stock.log.includes('start second'),
      );
      expect(await isLocked('stock:sku-a')).toBe(true);
      expect(await isLocked('stock:sku-b')).toBe(true);
      second.resolve();
      first.resolve();
      await Promise.all([a, b]);
      expect(stock.log.slice(2).sort()).toEqual(['end first', 'end second']);
    });

    it('locks every key of a template list, all or nothing; the same key once', async () => {
      expect(await stock.transfer({ from: 'alice', to: 'bob' })).toEqual([
        'account:alice',
        'account:bob',
      ]);
      expect(await stock.transfer({ from: 'alice', to: 'alice' })).toEqual(['account:alice']);
      const held = await locks.acquire('account:bob');
      await expect(stock.transfer({ from: 'carol', to: 'bob' })).rejects.toBeInstanceOf(
        LockTimeoutError,
      );
      expect(await isLocked('account:carol')).toBe(false);
      await held.release();
    });

    it('takes keys from a function called with the instance as `this`', async () => {
      expect(await stock.settle({ id: 42 })).toBe('order:42');
      expect(stock.calls).toBe(1);
    });

    it('gives a contended service caller LockTimeoutError naming the key', async () => {
      const held = await locks.acquire('order:7', { ttlMs: 10_000 });
      const err = await stock.ship({ id: 7 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockTimeoutError);
      expect((err as LockTimeoutError).key).toBe('order:7');
      expect(stock.calls).toBe(0);
      await held.release();
    });
  });

  describe('results and errors', () => {
    it("passes the method's result through and releases the lock", async () => {
      expect(await stock.reserve('sku-r', 'solo')).toBe('solo reserved sku-r');
      expect(await isLocked('stock:sku-r')).toBe(false);
    });

    it('passes errors through untouched and releases, also for a synchronous throw', async () => {
      await expect(stock.failAsync('a')).rejects.toThrow('async failure a');
      expect(await isLocked('fail:a')).toBe(false);
      const sync = stock.failSync('s');
      expect(sync).toBeInstanceOf(Promise);
      await expect(sync).rejects.toThrow('sync failure s');
      expect(await isLocked('fail:s')).toBe(false);
    });

    it('rejects a missing key value with LockKeyError before any lock is taken', async () => {
      const err = await stock.ship({}).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockKeyError);
      expect((err as Error).message).toBe(
        "@WithLock on StockService.ship: key template 'order:<0.id>': <0.id> is undefined; " +
          'expected a non-empty string, a finite number, a bigint or a boolean',
      );
      expect(stock.calls).toBe(0);
      expect(await redis.keys(`${prefix}lock:{order:*}`)).toEqual([]);
    });

    it('rejects a key function returning no string with LockKeyError', async () => {
      class Odd {
        @WithLock(() => 42 as unknown as string)
        async run(): Promise<void> {}
      }
      await expect(new Odd().run()).rejects.toThrow(
        /@WithLock on Odd.run: the key function returned 42/,
      );
    });
  });

  describe('options', () => {
    it('applies ttlMs from the decorator, and the module default where unset', async () => {
      const own = await stock.ttlOf('k', redis, prefix);
      expect(own).toBeGreaterThan(4_000);
      expect(own).toBeLessThanOrEqual(5_000);
      const fromModule = await stock.defaultTtlOf('k', redis, prefix);
      expect(fromModule).toBeGreaterThan(6_000);
      expect(fromModule).toBeLessThanOrEqual(7_000);
    });

    it('labels a template (or template list) over 200 characters with its first 199 and an ellipsis; every call runs', async () => {
      const long = `reports:${'segment:'.repeat(30)}<0>`;
      const many = Array.from({ length: 12 }, (_, i) => `ledger-account-${i}:<0>`);
      class Reports {
        @WithLock(long)
        async run(id: string): Promise<string> {
          return `ran ${id}`;
        }

        @WithLock(many)
        async settle(id: string): Promise<string> {
          return `settled ${id}`;
        }
      }
      const withLock = jest.spyOn(locks, 'withLock');
      try {
        expect(await new Reports().run('1')).toBe('ran 1');
        expect(await new Reports().settle('2')).toBe('settled 2');
        const labels = withLock.mock.calls.map(([, , options]) => options?.label);
        expect(labels).toEqual([`${long.slice(0, 199)}…`, `${many.join(',').slice(0, 199)}…`]);
      } finally {
        withLock.mockRestore();
      }
    });

    it('uses keyPrefix from the decorator', async () => {
      const other = uniquePrefix('with-lock-own-prefix');
      class Prefixed {
        @WithLock('p:<0>', { keyPrefix: other })
        async run(id: string): Promise<number> {
          return redis.exists(`${other}lock:{p:${id}}`);
        }
      }
      expect(await new Prefixed().run('1')).toBe(1);
    });

    it('makes the running lock reachable through currentLock(), whose signal aborts when it is lost', async () => {
      const reason = await stock.untilLost('x');
      expect(reason).toBeInstanceOf(LockLostError);
      expect((reason as LockLostError).keys).toEqual(['short:x']);
    });

    it.each([
      [{ ttlMs: 0 }, /invalid option 'ttlMs'/],
      [{ waitMs: -1 }, /invalid option 'waitMs'/],
      [{ autoExtend: 'yes' }, /invalid option 'autoExtend'/],
      [{ ttl: 5 }, /invalid option 'ttl': expected a known option/],
      [{ signal: new AbortController().signal }, /invalid option 'signal'/],
    ])('rejects options %p when decorating', (options, message) => {
      expect(() => {
        class Bad {
          @WithLock('k', options as never)
          async run(): Promise<void> {}
        }
        return Bad;
      }).toThrow(RedisLockOptionsError);
      expect(() => WithLock('k', options as never)).toThrow(message);
    });
  });

  describe('templates checked when decorating', () => {
    it('rejects a malformed template naming the method and the template', () => {
      expect(() => {
        class Bad {
          @WithLock('stock:<sku>')
          async buy(sku: string): Promise<void> {
            void sku;
          }
        }
        return Bad;
      }).toThrow(
        /^@WithLock on Bad.buy: key template 'stock:<sku>' has an invalid placeholder '<sku>'/,
      );
    });

    it('rejects a template naming an argument the method does not declare', () => {
      const define = () => {
        class Bad {
          @WithLock('stock:<2>')
          async buy(sku: string, qty: number): Promise<void> {
            void sku;
            void qty;
          }
        }
        return Bad;
      };
      expect(define).toThrow(LockKeyError);
      expect(define).toThrow(
        "@WithLock on Bad.buy: key template 'stock:<2>' names argument 2, but the method declares 2 parameters",
      );
    });

    it('counts parameters with default values; a rest parameter counts once', async () => {
      class Defaults {
        @WithLock('d:<1>')
        async run(a: string, b = 'fallback'): Promise<string> {
          return `${a}${b}`;
        }

        @WithLock('r:<0>')
        async rest(...ids: string[]): Promise<string> {
          return ids.join();
        }
      }
      expect(await new Defaults().run('x', 'y')).toBe('xy');
      expect(() => {
        class TooFar {
          @WithLock('r:<1>')
          async rest(...ids: string[]): Promise<void> {
            void ids;
          }
        }
        return TooFar;
      }).toThrow(/names argument 1, but the method declares 1 parameter$/);
    });

    it('rejects an empty list and a template listed twice', () => {
      expect(() => WithLock([])(Object.prototype, 'm', { value: async () => 1 })).toThrow(
        /the key template list is empty/,
      );
      expect(() =>
        WithLock(['a:<0>', 'a:<0>'])(Object.prototype, 'm', { value: async (_x: unknown) => 1 }),
      ).toThrow(/key template 'a:<0>' is listed twice/);
    });

    it('refuses anything but a method', () => {
      expect(() =>
        WithLock('k')(Object.prototype, 'getter', { get: () => Promise.resolve(1) } as never),
      ).toThrow('@WithLock on Object.getter: only methods can be decorated');
    });

    it('refuses a generator method, whose body would run after the call, outside the lock (every decorator)', () => {
      const decorators: [string, MethodDecorator][] = [
        ['@WithLock', WithLock('k')],
        ['@WithSemaphore', WithSemaphore('s', { limit: 1 })],
        ['@RateLimit', RateLimit('r', { limit: 1, windowMs: 1_000 })],
        ['@RequiresPass', RequiresPass('room', '<0>')],
        ['@OncePerTick', OncePerTick({ name: 'tick' })],
      ];
      for (const [name, decorator] of decorators) {
        for (const value of [
          function* items(_id: string) {
            yield 1;
          },
          async function* items(_id: string) {
            yield 1;
          },
        ]) {
          expect(() => decorator(Object.prototype, 'items', { value })).toThrow(
            `${name} on Object.items: a generator method cannot be decorated`,
          );
        }
      }
    });

    it("keeps the method's name and length", () => {
      expect(StockService.prototype.reserve.name).toBe('reserve');
      expect(StockService.prototype.reserve.length).toBe(2);
      expect(StockService.prototype.transfer.length).toBe(1);
    });
  });

  describe('reentrancy', () => {
    it('a nested call on the same key joins the held lock; an outsider waits for both', async () => {
      const innerOfOuter = stock.gate('inner outer');
      const outer = stock.outer('n1');
      await waitFor('outer call to reach inner', () => stock.log.includes('inner outer start'));
      const outsider = stock.inner('n1', 'outsider');
      await waitForLocalWaiters(locks, 'nest:n1');
      innerOfOuter.resolve();
      expect(await outer).toBe('inner outer under nest:n1');
      expect(await outsider).toBe('inner outsider under nest:n1');
      expect(stock.log).toEqual([
        'outer start',
        'inner outer start',
        'inner outer end',
        'outer end',
        'inner outsider start',
        'inner outsider end',
      ]);
    });
  });

  describe('Observable results', () => {
    it('a method declared to return an Observable takes the lock on subscription and holds it until completion', async () => {
      const subject = feeds.feed('a');
      const stream = feeds.watch('a');
      expect(feeds.watching.has('a')).toBe(false);
      expect(await isLocked('feed:a')).toBe(false);
      const values: number[] = [];
      const done = new Promise<boolean>((resolve, reject) =>
        stream.subscribe({
          next: (v) => values.push(v),
          error: reject,
          // Completion is delivered after the release.
          complete: () => void isLocked('feed:a').then(resolve),
        }),
      );
      await waitFor('the method to run', () => feeds.watching.has('a'));
      expect(await isLocked('feed:a')).toBe(true);
      subject.next(1);
      subject.next(2);
      expect(await isLocked('feed:a')).toBe(true);
      subject.complete();
      expect(await done).toBe(false);
      expect(values).toEqual([1, 2]);
    });

    it('releases the lock when the stream errors, then delivers the error', async () => {
      const subject = feeds.feed('err');
      const failed = lastValueFrom(feeds.watch('err')).catch((e: unknown) => e);
      await waitFor('the method to run', () => feeds.watching.has('err'));
      subject.error(new Error('stream broke'));
      expect(((await failed) as Error).message).toBe('stream broke');
      expect(await isLocked('feed:err')).toBe(false);
    });

    it('unsubscribing releases the lock', async () => {
      feeds.feed('u');
      const subscription: Subscription = feeds.watch('u').subscribe();
      await waitFor('the method to run', () => feeds.watching.has('u'));
      expect(await isLocked('feed:u')).toBe(true);
      subscription.unsubscribe();
      await waitFor('the lock to be released', async () => !(await isLocked('feed:u')));
    });

    it('each subscription is a call of its own that contends for the lock', async () => {
      feeds.feed('two');
      const first = feeds.watch('two').subscribe();
      await waitFor('the method to run', () => feeds.watching.has('two'));
      // The module's default waitMs is 0: the second subscription fails at once.
      const second = await lastValueFrom(feeds.watch('two')).catch((e: unknown) => e);
      expect(second).toBeInstanceOf(LockTimeoutError);
      first.unsubscribe();
    });

    it('an async method resolving to an Observable keeps the lock until the stream completes', async () => {
      const subject = feeds.feed('later');
      const stream = await feeds.watchLater('later');
      expect(await isLocked('later:later')).toBe(true);
      const last = lastValueFrom(stream);
      subject.next(5);
      expect(await isLocked('later:later')).toBe(true);
      subject.complete();
      expect(await last).toBe(5);
      expect(await isLocked('later:later')).toBe(false);
      // The lock went with the stream: subscribing again cannot run unlocked.
      const again = await lastValueFrom(stream).catch((e: unknown) => e);
      expect(again).toBeInstanceOf(LockLostError);
      expect((again as Error).message).toMatch(/holds it for one subscription only/);
    });

    it('an Observable nobody subscribes to lets its lock go after ttlMs; subscribing later fails', async () => {
      feeds.feed('dropped');
      const stream = await feeds.watchLater('dropped');
      expect(await isLocked('later:dropped')).toBe(true);
      await waitFor('the lock to be let go', async () => !(await isLocked('later:dropped')));
      const err = await lastValueFrom(stream).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockLostError);
      expect((err as Error).message).toMatch(/was not subscribed within 1000 ms/);
    });
  });
});

describe('@WithLock finds its LockService', () => {
  const prefixA = uniquePrefix('with-lock-a');
  const prefixB = uniquePrefix('with-lock-b');

  @Injectable()
  class Probe {
    @WithLock('probe')
    async where(redis: Redis, prefixes: string[]): Promise<string[]> {
      return this.whereUnlocked(redis, prefixes);
    }

    /** The prefixes under which the lock 'probe' is held. */
    async whereUnlocked(redis: Redis, prefixes: string[]): Promise<string[]> {
      const found: string[] = [];
      for (const p of prefixes) if (await redis.exists(`${p}lock:{probe}`)) found.push(p);
      return found;
    }
  }

  @Injectable()
  class ProbeA extends Probe {}
  @Injectable()
  class ProbeB extends Probe {
    @WithLock('probe')
    static async whereStatic(redis: Redis, prefixes: string[]): Promise<string[]> {
      return new ProbeB().whereUnlocked(redis, prefixes);
    }
  }
  /** A new instance per request: bound by its class. */
  @Injectable({ scope: Scope.REQUEST })
  class RequestProbeB extends Probe {}

  @Module({
    imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefixA })],
    providers: [ProbeA],
  })
  class FeatureA {}

  @Module({
    imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefixB })],
    providers: [ProbeB, RequestProbeB],
  })
  class FeatureB {}

  @Module({ providers: [Probe] })
  class Plain {}

  let redis: Redis;
  beforeAll(() => {
    redis = redisClient();
  });
  afterAll(() => redis.disconnect());

  it('uses the RedisLockModule each feature module imports', async () => {
    const app = await (
      await Test.createTestingModule({ imports: [FeatureA, FeatureB] }).compile()
    ).init();
    try {
      expect(await app.get(ProbeA).where(redis, [prefixA, prefixB])).toEqual([prefixA]);
      expect(await app.get(ProbeB).where(redis, [prefixA, prefixB])).toEqual([prefixB]);
      expect(await ProbeB.whereStatic(redis, [prefixA, prefixB])).toEqual([prefixB]);
      const perRequest = await app.resolve(RequestProbeB);
      expect(await perRequest.where(redis, [prefixA, prefixB])).toEqual([prefixB]);
      // Two modules run, and an unmanaged instance belongs to neither: a clear error.
      await expect(new Probe().where(redis, [])).rejects.toThrow(
        '@WithLock on Probe.where: no LockService — import RedisLockModule.forRoot() in the module ' +
          'that provides Probe (2 RedisLockModules are running and none is known to serve this instance)',
      );
    } finally {
      await app.close();
    }
  });

  it('uses a global RedisLockModule from a module that does not import it', async () => {
    const app = await (
      await Test.createTestingModule({
        imports: [
          RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefixA, isGlobal: true }),
          Plain,
        ],
      }).compile()
    ).init();
    try {
      expect(await app.get(Probe).where(redis, [prefixA])).toEqual([prefixA]);
      // An instance Nest does not manage uses the only running LockService.
      expect(await new Probe().where(redis, [prefixA])).toEqual([prefixA]);
    } finally {
      await app.close();
    }
  });

  it('fails with a clear RedisLockError when RedisLockModule is not imported', async () => {
    const app = await (await Test.createTestingModule({ imports: [Plain] }).compile()).init();
    try {
      const err = await app
        .get(Probe)
        .where(redis, [])
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisLockError);
      expect((err as Error).message).toBe(
        '@WithLock on Probe.where: no LockService — import RedisLockModule.forRoot() in the ' +
          'module that provides Probe',
      );
    } finally {
      await app.close();
    }
  });

  describe('a class provided in two features, each with its own RedisLockModule', () => {
    @Injectable({ scope: Scope.TRANSIENT })
    class TransientProbe extends Probe {}
    @Injectable({ scope: Scope.REQUEST })
    class RequestProbe extends Probe {}
    @Injectable()
    class ConsumerA {
      constructor(readonly probe: TransientProbe) {}
    }
    @Injectable()
    class ConsumerB {
      constructor(readonly probe: TransientProbe) {}
    }
    @Module({
      imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefixA })],
      providers: [TransientProbe, RequestProbe, ConsumerA],
    })
    class TwinA {}
    @Module({
      imports: [RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefixB })],
      providers: [TransientProbe, RequestProbe, ConsumerB],
    })
    class TwinB {}

    it("locks a transient provider's instance through its own feature's module", async () => {
      const app = await (
        await Test.createTestingModule({ imports: [TwinA, TwinB] }).compile()
      ).init();
      try {
        const a = app.get(ConsumerA).probe;
        const b = app.get(ConsumerB).probe;
        expect(await a.where(redis, [prefixA, prefixB])).toEqual([prefixA]);
        expect(await b.where(redis, [prefixA, prefixB])).toEqual([prefixB]);
      } finally {
        await app.close();
      }
    });

    it('fails, naming the class, on an instance neither module can claim (never locks elsewhere)', async () => {
      const app = await (
        await Test.createTestingModule({ imports: [TwinA, TwinB] }).compile()
      ).init();
      try {
        const perRequest = await app.select(TwinA).resolve(RequestProbe);
        const err = await perRequest.where(redis, [prefixA, prefixB]).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(RedisLockError);
        expect((err as Error).message).toMatch(
          /^RequestProbe is provided under 2 running RedisLockModules, .*provide RequestProbe under one RedisLockModule only/,
        );
      } finally {
        await app.close();
      }
      // Once the application is closed, its bindings no longer count.
      const alone = await (await Test.createTestingModule({ imports: [TwinB] }).compile()).init();
      try {
        const perRequest = await alone.resolve(RequestProbe);
        expect(await perRequest.where(redis, [prefixA, prefixB])).toEqual([prefixB]);
      } finally {
        await alone.close();
      }
    });
  });
});
