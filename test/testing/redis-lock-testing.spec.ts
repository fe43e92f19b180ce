import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  LockService,
  LockTimeoutError,
  QueueService,
  QueueWorker,
  RedisLockError,
  RedisLockOptionsError,
  SemaphoreService,
  WithLock,
  type RunningTask,
} from '../../lib';
import {
  RedisLockTesting,
  RedisLockTestingModule,
  MemoryRedisServer,
  type RunUntilIdleOptions,
} from '../../lib/testing';
import { deferred } from '../support/helpers';

// RedisLockTestingModule: the module on the in-memory Redis, driven by Jest's fake timers. The
// example of docs/testing.md, plus what it promises (no open handles, helpers, shared servers).

interface Email {
  to: string;
}

@Injectable()
class Mailer {
  readonly sent: string[] = [];
  /** How many sends fail before one succeeds. */
  failures = 1;

  @QueueWorker('emails', { maxAttempts: 3, backoff: { type: 'fixed', delayMs: 60_000 } })
  async send(task: RunningTask<Email>): Promise<void> {
    if (this.failures-- > 0) throw new Error('SMTP unavailable');
    this.sent.push(task.payload.to);
  }
}

@Injectable()
class Inventory {
  @WithLock('sku:<0>', { waitMs: 1_000 })
  async reserve(sku: string, until: Promise<void>): Promise<string> {
    await until;
    return sku;
  }
}

describe('RedisLockTestingModule (fake timers)', () => {
  let app: INestApplicationContext;
  let testing: RedisLockTesting;
  const advance = (ms: number) => jest.advanceTimersByTimeAsync(ms);

  beforeEach(async () => {
    jest.useFakeTimers();
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockTestingModule.forRoot({ keyPrefix: 'shop:' })],
      providers: [Mailer, Inventory],
    }).compile();
    app = await moduleRef.init();
    testing = app.get(RedisLockTesting);
  });

  afterEach(async () => {
    await app.close();
    jest.useRealTimers();
  });

  it('retries a failed task after its 60 s backoff, not before', async () => {
    const queues = app.get(QueueService);
    const mailer = app.get(Mailer);
    await queues.enqueue('emails', 'welcome-1', { payload: { to: 'ada@example.com' } });

    // The first attempt fails: the task waits out its backoff.
    await testing.runUntilIdle({ advance, delayed: false });
    expect(mailer.sent).toEqual([]);
    const [waiting] = await testing.enqueued<Email>('emails');
    expect(waiting).toMatchObject({ id: 'welcome-1', state: 'delayed', attempts: 1 });
    expect(waiting.time - Date.now()).toBeGreaterThan(59_900); // its 60 s backoff

    await advance(59_000);
    expect(mailer.sent).toEqual([]);
    await advance(1_000);
    await testing.runUntilIdle({ advance });
    expect(mailer.sent).toEqual(['ada@example.com']);
    expect(await queues.get('emails', 'welcome-1')).toMatchObject({
      state: 'completed',
      attempts: 2,
    });
  });

  it('runUntilIdle moves the clock to the earliest due task, also when a later one without priority or group is listed first', async () => {
    const queues = app.get(QueueService);
    const start = Date.now();
    const ranAt: Record<string, number> = {};
    const worker = queues.process('clock', (task) => {
      ranAt[task.id] = Date.now() - start;
    });
    // `list(queue, 'delayed')` gives the plain task first, though it is due last.
    await queues.enqueue('clock', 'plain', { delayMs: 60_000 });
    await queues.enqueue('clock', 'prio', { delayMs: 1_000, priority: 1 });
    await queues.enqueue('clock', 'group', { delayMs: 2_000, group: 'g' });
    expect((await queues.list('clock', 'delayed')).map((t) => t.id)[0]).toBe('plain');
    await testing.runUntilIdle({ advance, queues: ['clock'] });
    await worker.close();
    expect(Object.keys(ranAt)).toEqual(['prio', 'group', 'plain']);
    // Each at its due time (a worker's claim takes a few fake ms), not at a later one's.
    expect(ranAt.prio).toBeGreaterThanOrEqual(1_000);
    expect(ranAt.prio).toBeLessThan(1_100);
    expect(ranAt.group).toBeGreaterThanOrEqual(2_000);
    expect(ranAt.group).toBeLessThan(2_100);
    expect(ranAt.plain).toBeGreaterThanOrEqual(60_000);
  });

  it('enqueued lists the tasks oldest first, whatever their state, priority or delay, then by id', async () => {
    const queues = app.get(QueueService);
    // No worker runs for this queue: the tasks stay where they were enqueued.
    await queues.enqueue('order', 'first-delayed', { delayMs: 60_000 });
    await advance(5);
    await queues.enqueue('order', 'second');
    await advance(5);
    await queues.enqueue('order', ['c-same-ms', 'b-same-ms']);
    await advance(5);
    await queues.enqueue('order', 'last-urgent', { priority: -1 });
    expect((await testing.enqueued('order')).map((t) => t.id)).toEqual([
      'first-delayed',
      'second',
      'b-same-ms',
      'c-same-ms',
      'last-urgent',
    ]);
  });

  it('runUntilIdle moves the clock through every backoff until the queues are idle', async () => {
    const queues = app.get(QueueService);
    const mailer = app.get(Mailer);
    mailer.failures = 2;
    const start = Date.now();
    await queues.enqueue('emails', ['a', 'b'], { payload: { to: 'x@example.com' } });
    await testing.runUntilIdle({ advance });
    expect(mailer.sent).toEqual(['x@example.com', 'x@example.com']);
    // Both fail once (2 failures in all), wait out their 60 s backoff and then complete.
    expect(Date.now() - start).toBeGreaterThanOrEqual(60_000);
    expect(await testing.enqueued('emails')).toEqual([]);
    expect(await queues.stats('emails')).toMatchObject({
      ready: 0,
      delayed: 0,
      leased: 0,
      dead: 0,
    });
  });

  it("runUntilIdle moves the clock through a grouped task's retry backoff (its group parked, the task ready)", async () => {
    const queues = app.get(QueueService);
    const runs: number[] = [];
    const worker = queues.process(
      'grouped',
      (task) => {
        runs.push(task.attempt);
        if (task.attempt === 1) throw new Error('SMTP unavailable');
      },
      { maxAttempts: 3, backoff: { type: 'fixed', delayMs: 60_000 } },
    );
    await queues.enqueue('grouped', 'a', { group: 'user-1' });
    await testing.runUntilIdle({ advance, queues: ['grouped'] });
    await worker.close();
    expect(runs).toEqual([1, 2]);
    expect(await queues.get('grouped', 'a')).toMatchObject({ state: 'completed', attempts: 2 });
  });

  it("runUntilIdle moves the clock through a queue limiter's window (the next task ready, not claimed)", async () => {
    const queues = app.get(QueueService);
    const runs: string[] = [];
    const worker = queues.process('limited', (task) => void runs.push(task.id), {
      limiter: { max: 1, durationMs: 60_000 },
    });
    await queues.enqueue('limited', ['a', 'b']);
    await testing.runUntilIdle({ advance, queues: ['limited'] });
    await worker.close();
    expect(runs).toEqual(['a', 'b']);
    expect(await queues.stats('limited')).toMatchObject({ ready: 0, leased: 0, completed: 2 });
  });

  it('runUntilIdle moves the clock through a rateLimit pause', async () => {
    const queues = app.get(QueueService);
    const runs: string[] = [];
    const worker = queues.process('paused-for', (task) => void runs.push(task.id));
    await queues.rateLimit('paused-for', 30_000);
    await queues.enqueue('paused-for', 'a');
    await testing.runUntilIdle({ advance, queues: ['paused-for'] });
    await worker.close();
    expect(runs).toEqual(['a']);
  });

  it('runUntilIdle without advance refuses at once with RedisLockOptionsError naming advance', async () => {
    const error: unknown = await testing.runUntilIdle().catch((err: unknown) => err);
    expect(error).toBeInstanceOf(RedisLockOptionsError);
    expect((error as RedisLockOptionsError).option).toBe('advance');
    expect((error as Error).message).toContain('jest.advanceTimersByTimeAsync');
  });

  it('@WithLock: a second caller waits for the holder and times out after waitMs', async () => {
    const inventory = app.get(Inventory);
    const release = deferred();
    const first = inventory.reserve('apple', release.promise);
    await advance(0);
    const second = inventory.reserve('apple', Promise.resolve());
    const secondFails = expect(second).rejects.toBeInstanceOf(LockTimeoutError);
    await advance(1_000);
    await secondFails;
    release.resolve();
    await expect(first).resolves.toBe('apple');
    // Released: the next caller gets it at once.
    await expect(inventory.reserve('apple', Promise.resolve())).resolves.toBe('apple');
  });

  it('expires a lock when its TTL passes on the fake clock', async () => {
    const locks = app.get(LockService);
    const lock = await locks.acquire('report', { ttlMs: 5_000 });
    expect(await locks.tryAcquire('report')).toBeNull();
    await advance(5_001);
    const again = await locks.tryAcquire('report');
    expect(again).toBeDefined();
    await again!.release();
    await lock.release().catch(() => undefined);
  });

  it('semaphores count permits on the in-memory Redis', async () => {
    const semaphores = app.get(SemaphoreService);
    const a = await semaphores.acquire('exports', { limit: 2 });
    const b = await semaphores.acquire('exports', { limit: 2 });
    expect(await semaphores.tryAcquire('exports', { limit: 2 })).toBeNull();
    await a.release();
    const c = await semaphores.tryAcquire('exports', { limit: 2 });
    expect(c).toBeDefined();
    await Promise.all([b.release(), c!.release()]);
  });
});

describe('RedisLockTestingModule (real timers)', () => {
  it('two applications on one MemoryRedisServer share locks; flush() empties it', async () => {
    const server = new MemoryRedisServer();
    const apps = await Promise.all(
      [1, 2].map(async () =>
        (
          await Test.createTestingModule({
            imports: [RedisLockTestingModule.forRoot({ server })],
          }).compile()
        ).init(),
      ),
    );
    const [one, two] = apps.map((a) => a.get(LockService));
    const held = await one.acquire('shared');
    expect(await two.tryAcquire('shared')).toBeNull();
    await held.release();
    const taken = await two.tryAcquire('shared');
    expect(taken).toBeDefined();
    await taken!.release();
    await apps[0].get(RedisLockTesting).flush();
    expect(await apps[0].get(RedisLockTesting).client.dbsize()).toBe(0);
    await Promise.all(apps.map((a) => a.close()));
    // Every client the modules made (subscribers, blockers) is closed: nothing keeps Jest open.
    expect(server.connectedClients).toBe(0);
  });

  it('stops the expiry clock while a script runs, as Redis 7 does: a key read as live is not written back without its TTL', async () => {
    const server = new MemoryRedisServer();
    // Loads the Lua engine first (the first script is slow to start).
    server.execute('eval', ['return 1', '0']);
    server.execute('set', ['k', 'v', 'PX', '20']);
    // Reads the key, waits (on TIME) until its TTL has run out, then marks it keeping the TTL.
    const script = `
      local v = redis.call('GET', KEYS[1])
      local t = redis.call('TIME')
      local till = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + 40
      repeat t = redis.call('TIME') until tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) >= till
      redis.call('SET', KEYS[1], v .. '*', 'KEEPTTL')
      return redis.call('PTTL', KEYS[1])`;
    // For the script the key is still live, with what was left of its TTL at its start.
    expect(server.execute('eval', [script, '1', 'k'])).toBeGreaterThan(0);
    // It ran out in the script: gone now, not kept for good (PTTL -1).
    expect(server.execute('exists', ['k'])).toBe(0);
  });

  it('without advance, runUntilIdle polls real time and ignores delayed tasks', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockTestingModule.forRoot()],
      providers: [Mailer],
    }).compile();
    const app = await moduleRef.init();
    const mailer = app.get(Mailer);
    mailer.failures = 0;
    await app.get(QueueService).enqueue('emails', 'x', { payload: { to: 'y@example.com' } });
    await app.get(RedisLockTesting).runUntilIdle();
    expect(mailer.sent).toEqual(['y@example.com']);
    await app.close();
  });

  it('rejects after maxSteps, naming what is left', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockTestingModule.forRoot()],
    }).compile();
    const app = await moduleRef.init();
    await app.get(QueueService).enqueue('orphans', 'x');
    const error: unknown = await app
      .get(RedisLockTesting)
      .runUntilIdle({ queues: ['orphans'], maxSteps: 3 })
      .catch((err: unknown) => err);
    expect(error).toBeInstanceOf(RedisLockError);
    expect((error as Error).message).toMatch(/not idle after 3 steps \(orphans: .*"ready":1/);
    await app.close();
  });

  it('refuses a maxSteps that is not a positive integer and every other bad option, naming it, instead of reporting ready tasks idle', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockTestingModule.forRoot()],
    }).compile();
    const app = await moduleRef.init();
    await app.get(QueueService).enqueue('orphans', 'x');
    const cases: Array<[string, unknown]> = [
      ['maxSteps', { maxSteps: 0 }],
      ['maxSteps', { maxSteps: -1 }],
      ['maxSteps', { maxSteps: Number.NaN }],
      ['maxSteps', { maxSteps: 2.5 }],
      ['advance', { advance: 5 }],
      ['delayed', { delayed: 'yes' }],
      ['queues', { queues: 'orphans' }],
      ['queues[1]', { queues: ['orphans', 'half-\uD83D'] }],
      ['maxStep', { maxStep: 3 }],
    ];
    const refused: string[] = [];
    for (const [, options] of cases) {
      const error: unknown = await app
        .get(RedisLockTesting)
        .runUntilIdle({ queues: ['orphans'], maxSteps: 3, ...(options as RunUntilIdleOptions) })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      refused.push(error instanceof RedisLockOptionsError ? error.option : String(error));
    }
    expect(refused).toEqual(cases.map(([option]) => option));
    expect(await app.get(QueueService).stats('orphans')).toMatchObject({ ready: 1 });
    expect(() => RedisLockTestingModule.forRoot({ server: {} as MemoryRedisServer })).toThrow(
      new RedisLockOptionsError('server', {}, 'a MemoryRedisServer'),
    );
    await app.close();
  });
});
