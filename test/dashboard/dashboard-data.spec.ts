import 'reflect-metadata';
import type { INestApplication, INestApplicationContext } from '@nestjs/common';
import fc from 'fast-check';
import {
  LockService,
  QueueService,
  RedisLockDashboardModule,
  RedisLockEvents,
  RedisLockOptionsError,
  type DashboardLock,
  type DashboardOverview,
  type DashboardTask,
  type QueueTaskInfo,
  type RedisLockDashboardOptions,
  type RedisLockModuleOptions,
  type RunningTask,
} from '../../lib';
import {
  localWaitersKey,
  lockNameOf,
  queueNameOf,
  recentEventsKey,
} from '../../lib/dashboard/dashboard-keys';
import { resolveDashboardOptions } from '../../lib/dashboard/dashboard-options';
import {
  LOCAL_REPORT_STALE_MS,
  RECENT_EVENT_KEYS_MAX,
  RECENT_EVENTS_MAX,
} from '../../lib/dashboard/dashboard-recorder';
import {
  DashboardService,
  TASK_JSON_PREVIEW_CHARS,
  TASK_JSON_READ_BYTES,
  dashboardJson,
  toDashboardTask,
} from '../../lib/dashboard/dashboard.service';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { compileDashboardModule } from './support/dashboard-module';
import { lineFrom, spawnTs } from '../support/child';
import {
  redisClient,
  redisTimeMs,
  testRedisUrl,
  uniquePrefix,
  waitFor,
  waitForLocalWaiters,
} from '../support/helpers';

describe('RedisLockDashboardModule.forRoot options', () => {
  it.each<[string, unknown]>([
    ['path', ''],
    ['path', '/has space'],
    ['path', '/a//b'],
    ['path', 42],
    ['readOnly', 'yes'],
    ['guards', {}],
    ['guards[1]', [class {}, { notAGuard: true }]],
    ['queues', 'orders'],
    ['queues[0]', ['']],
    ['queues[1]', ['orders', 'orders-\uD83D']], // half an emoji: every queue call refuses it
    ['maxScanKeys', 10],
    ['maxLocks', 0],
    ['maxLocks', 1.5],
    ['overviewIntervalMs', 10],
    ['overviewIntervalMs', '500'],
    ['colour', 'blue'],
  ])("names '%s' when it is %p", (option, value) => {
    const key = option.replace(/\[\d+\]$/, '') as keyof RedisLockDashboardOptions;
    const options = { [key]: value } as RedisLockDashboardOptions;
    let error: unknown;
    try {
      RedisLockDashboardModule.forRoot(options);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(RedisLockOptionsError);
    expect((error as RedisLockOptionsError).option).toBe(option);
    expect((error as Error).message).toContain(`'${option}'`);
  });

  it('accepts the documented options', () => {
    expect(() =>
      RedisLockDashboardModule.forRoot({
        path: '/ops/redis-lock/',
        readOnly: true,
        guards: [{ canActivate: () => true }],
        queues: ['orders'],
        maxScanKeys: 100,
        maxLocks: 1_000,
        overviewIntervalMs: 60_000,
      }),
    ).not.toThrow();
  });

  it('is read-only unless the app opts in: with guards, or with readOnly: false', () => {
    const guard = { canActivate: () => true };
    const readOnly = (options: RedisLockDashboardOptions) =>
      resolveDashboardOptions(options).readOnly;
    expect(readOnly({})).toBe(true);
    expect(readOnly({ guards: [] })).toBe(true);
    expect(readOnly({ guards: [guard] })).toBe(false);
    expect(readOnly({ readOnly: false })).toBe(false);
    expect(readOnly({ guards: [guard], readOnly: true })).toBe(true);
    expect(resolveDashboardOptions({}).overviewIntervalMs).toBe(500);
  });
});

describe('dashboard key names', () => {
  const names = fc.string({ minLength: 1, maxLength: 40 });

  it('finds the lock whose value key it scanned (never one of its other keys)', () => {
    fc.assert(
      fc.property(fc.constantFrom('', 'app:', 'x{y}:'), names, (prefix, name) => {
        // Every name has keys of its own (`a` and `{a}` too): the name found is the name.
        const keys = lockRedisKeys(prefix, name);
        return (
          lockNameOf(prefix, keys.value) === name && lockNameOf(prefix, keys.fence) === undefined
        );
      }),
    );
    expect(lockNameOf('', lockRedisKeys('', 'order:1').fence)).toBeUndefined();
  });

  it('skips keys under lock: and queue: that no name has (written by something else)', () => {
    for (const part of ['}}', '{}', 'x', '{x', '{a}b}', '{a}}', '{ab}a}b}}']) {
      expect([part, lockNameOf('p:', `p:lock:${part}`)]).toEqual([part, undefined]);
      expect([part, queueNameOf('p:', `p:queue:${part}:dead`, ['dead'])]).toEqual([
        part,
        undefined,
      ]);
    }
  });

  it('finds the queue of a scanned queue key', () => {
    fc.assert(
      fc.property(fc.constantFrom('', 'p:', 'x{y}:'), names, (prefix, name) => {
        return queueNameOf(prefix, queueRedisKeys(prefix, name).dead, ['dead']) === name;
      }),
    );
    expect(queueNameOf('p:', queueRedisKeys('p:', 'q').wake, ['dead'])).toBeUndefined();
  });
});

describe('DashboardService', () => {
  const redis = redisClient();
  let app: INestApplicationContext | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(() => redis.disconnect());

  async function start(prefix: string, options: RedisLockDashboardOptions = {}) {
    const moduleRef = await compileDashboardModule(prefix, 'data-app', options);
    app = await moduleRef.init();
    return app;
  }

  it('lists held locks matching the search, at most maxLocks, and says when it cut the list', async () => {
    const prefix = uniquePrefix('dash-data');
    const ctx = await start(prefix, { maxLocks: 2, maxScanKeys: 1_000_000 });
    const locks = ctx.get(LockService);
    const held = await Promise.all(
      ['a:1', 'a:2', 'a:3', 'b:1'].map((key) => locks.acquire(key, { fencing: true })),
    );
    await locks.acquire('released').then((l) => l.release());
    const dashboard = ctx.get(DashboardService);

    const all = await dashboard.heldLocks('');
    expect(all.items.map((l) => l.key)).toEqual(['a:1', 'a:2']);
    expect(all.truncated).toBe(true);
    expect(all.items[0]).toMatchObject({ owner: 'data-app', lineLength: 0, line: [] });
    expect(all.items[0].fence).toBeGreaterThan(0);
    expect(all.items[0].ttlMs).toBeGreaterThan(0);

    const b = await dashboard.heldLocks('b:');
    expect(b).toMatchObject({ items: [{ key: 'b:1', owner: 'data-app' }], truncated: false });
    await Promise.all(held.map((l) => l.release()));
    expect((await dashboard.heldLocks('')).items).toEqual([]);
  });

  it('names the holders of a read lock, and keeps "seen since" of locks a search did not cover', async () => {
    const prefix = uniquePrefix('dash-shared');
    const ctx = await start(prefix);
    const locks = ctx.get(LockService);
    const dashboard = ctx.get(DashboardService);
    const readers = await Promise.all([1, 2].map(() => locks.acquire('doc', { mode: 'shared' })));
    const writer = await locks.acquire('other');
    const first = await dashboard.heldLocks('');
    expect(first.items.map((l) => [l.key, l.owner])).toEqual([
      ['doc', 'shared: data-app, data-app'],
      ['other', 'data-app'],
    ]);
    // A search for 'doc' leaves 'other' as it was first seen.
    await dashboard.heldLocks('doc');
    const again = await dashboard.heldLocks('');
    expect(again.items.find((l) => l.key === 'other')!.seenSince).toBe(
      first.items.find((l) => l.key === 'other')!.seenSince,
    );
    await Promise.all([...readers, writer].map((l) => l.release()));
  });

  it('stops its key scan at maxScanKeys and says so', async () => {
    const prefix = uniquePrefix('dash-scan');
    const ctx = await start(prefix, { maxScanKeys: 100 });
    const pipeline = redis.pipeline();
    for (let i = 0; i < 1_000; i++) pipeline.set(`${prefix}lock:{k${i}}`, 'x', 'PX', 60_000);
    await pipeline.exec();
    const result = await ctx.get(DashboardService).heldLocks('');
    expect(result.truncated).toBe(true);
    expect(result.items.length).toBeLessThanOrEqual(100);
  });

  it('shows configured, local and scanned queues with counts and the throughput of its workers', async () => {
    const prefix = uniquePrefix('dash-queues');
    const ctx = await start(prefix, { queues: ['configured'] });
    const queues = ctx.get(QueueService);
    await queues.enqueue('scanned', 's-1', { delayMs: 60_000 });
    const worker = queues.process('local', async () => undefined);
    await queues.enqueue('local', [1, 2, 3, 4, 5, 6, 7]);
    const dashboard = ctx.get(DashboardService);
    await waitFor(
      '7 completions in the throughput of queue local',
      async () => {
        const local = (await dashboard.overview()).queues.find((q) => q.name === 'local');
        return local?.throughput.reduce((a, b) => a + b, 0) === 7;
      },
      15_000,
      50,
    );
    const overview = await dashboard.overview();
    expect(overview.queues.map((q) => q.name)).toEqual(['configured', 'local', 'scanned']);
    expect(overview.queues[1]).toMatchObject({ workersHere: 1, ready: 0, dead: 0 });
    // Every instance's workers of the queue (this one's only, here).
    expect(overview.queues[1].workers).toEqual([
      expect.objectContaining({ pid: process.pid, running: 0, names: [] }),
    ]);
    expect(overview.queues[2].workers).toEqual([]);
    expect(overview.queues[1].throughput).toHaveLength(60);
    expect(overview.queues[2]).toMatchObject({ delayed: 1, ready: 0, workersHere: 0 });
    await worker.close();
  });

  it('keeps the newest 100 lock timeouts and lost locks of every instance, in an expiring list', async () => {
    const prefix = uniquePrefix('dash-events');
    const ctx = await start(prefix);
    const events = ctx.get(RedisLockEvents);
    for (let i = 0; i < 150; i++) {
      events.emit('lock.timeout', { keys: [`k${i}`], waitedMs: i, reason: 'timeout' });
    }
    events.emit('lock.lost', { keys: ['gone'], reason: 'taken' });
    const dashboard = ctx.get(DashboardService);
    await waitFor(
      'the lost lock in the recent list',
      async () => (await dashboard.recentEvents())[0]?.keys[0] === 'gone',
      10_000,
      50,
    );
    const recent = await dashboard.recentEvents();
    expect(recent).toHaveLength(RECENT_EVENTS_MAX);
    expect(recent[0]).toMatchObject({ kind: 'lost', reason: 'taken', instance: 'data-app' });
    expect(recent[1]).toMatchObject({ kind: 'timeout', keys: ['k149'], waitedMs: 149 });
    expect(recent[99].keys).toEqual(['k51']);
    expect(await redis.pttl(recentEventsKey(prefix))).toBeGreaterThan(0);
  });

  it('keeps the first lock names of an event naming thousands, and how many it had', async () => {
    const prefix = uniquePrefix('dash-many');
    const ctx = await start(prefix);
    const keys = Array.from({ length: 5_000 }, (_, i) => `${'x'.repeat(400)}${i}`);
    for (let i = 0; i < RECENT_EVENTS_MAX; i++) {
      ctx.get(RedisLockEvents).emit('lock.timeout', { keys, waitedMs: i, reason: 'timeout' });
    }
    const dashboard = ctx.get(DashboardService);
    await waitFor(
      'the events in the recent list',
      async () => (await dashboard.recentEvents()).length === RECENT_EVENTS_MAX,
      10_000,
      50,
    );
    const [newest] = await dashboard.recentEvents();
    expect(newest.keys).toEqual(keys.slice(0, RECENT_EVENT_KEYS_MAX));
    expect(newest.keysTotal).toBe(5_000);
    // 100 events x 10 names x ~400 bytes: the overview stays well under a megabyte (the whole
    // list of names would be 100 x 2 MB).
    expect(JSON.stringify(await dashboard.overview()).length).toBeLessThan(1_000_000);
  });
});

describe('GET api/overview: callers waiting inside each instance', () => {
  const redis = redisClient();
  let app: INestApplication | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(() => redis.disconnect());

  /** An HTTP app with the lock module (keys under `prefix`, named `instanceId`) and the dashboard. */
  async function startHttp(prefix: string, instanceId: string): Promise<INestApplication> {
    const moduleRef = await compileDashboardModule(prefix, instanceId);
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    return app;
  }

  /** The held lock `key` as the dashboard's JSON endpoint shows it now (undefined: not listed). */
  async function shown(key: string): Promise<DashboardLock | undefined> {
    const base = (await app!.getUrl()).replace('[::1]', '127.0.0.1');
    const res = await fetch(`${base}/redis-lock/api/overview`);
    expect(res.status).toBe(200);
    const overview = (await res.json()) as DashboardOverview;
    return overview.locks.items.find((l) => l.key === key);
  }

  it('shows 2 waiting on the serving instance while two of its callers wait behind its holder', async () => {
    const prefix = uniquePrefix('dash-local-here');
    const locks = (await startHttp(prefix, 'here-app')).get(LockService);
    const holder = await locks.acquire('order:7', { ttlMs: 30_000 });
    const waiters = [1, 2].map(() =>
      locks.withLock('order:7', async () => undefined, { waitMs: 30_000 }),
    );
    await waitForLocalWaiters(locks, 'order:7', 2);

    expect(await shown('order:7')).toMatchObject({
      owner: 'here-app',
      line: [],
      lineLength: 0,
      localWaiters: [{ instance: 'here-app', waiting: 2 }],
    });
    await holder.release();
    await Promise.all(waiters);
    // The overview is shared for overviewIntervalMs (500 ms): a later poll drops it.
    await waitFor('order:7 no longer held', async () => (await shown('order:7')) === undefined);
  });

  it('shows 2 waiting on another process while two of its callers wait behind its holder, and drops them once served', async () => {
    const prefix = uniquePrefix('dash-local-other');
    await startHttp(prefix, 'dashboard-app');
    const child = spawnTs('test/fixtures/dashboard-child.ts', [], {
      REDIS_URL: testRedisUrl(),
      PREFIX: prefix,
      KEY: 'order:8',
      MODE: 'cohort',
      INSTANCE_ID: 'cohort-proc',
    });
    // Start-up through ts-node: 10 s alone at a load of 15-20 on the 2-core machine.
    await lineFrom(child, /^waiting 2$/, 90_000);

    // The first refresh marks the lock shown; the child reports on its next second or two.
    await waitFor(
      '2 callers waiting on cohort-proc in the overview',
      async () => (await shown('order:8'))?.localWaiters[0]?.waiting === 2,
      15_000,
      100,
    );
    expect(await shown('order:8')).toMatchObject({
      owner: 'cohort-proc',
      line: [],
      lineLength: 0,
      localWaiters: [{ instance: 'cohort-proc', waiting: 2 }],
    });

    const done = lineFrom(child, /^done$/, 30_000);
    child.kill('SIGTERM');
    await done;
    await waitFor('order:8 no longer held', async () => (await shown('order:8')) === undefined);
    // Its shutdown withdrew its report.
    await waitFor(
      'the report of cohort-proc withdrawn',
      async () => (await redis.hget(localWaitersKey(prefix), 'cohort-proc')) === null,
    );
  }, 180_000);

  it(`ignores a report older than ${LOCAL_REPORT_STALE_MS} ms (an instance that stopped reporting)`, async () => {
    const prefix = uniquePrefix('dash-local-stale');
    const locks = (await startHttp(prefix, 'stale-app')).get(LockService);
    const holder = await locks.acquire('order:9');
    const now = await redisTimeMs(redis);
    await redis.hset(localWaitersKey(prefix), {
      'gone-proc': `${now - LOCAL_REPORT_STALE_MS - 1_000}|{"order:9":3}`,
      'live-proc': `${now}|{"order:9":1,"other":4}`,
    });
    expect((await shown('order:9'))?.localWaiters).toEqual([{ instance: 'live-proc', waiting: 1 }]);
    await holder.release();
  });
});

describe('dashboard task rows', () => {
  it("carry the task's name when it has one", () => {
    const task: QueueTaskInfo = {
      queue: 'q',
      id: 'a',
      state: 'ready',
      time: 1,
      attempts: 0,
      payload: undefined,
    };
    expect(toDashboardTask({ ...task, name: 'welcome' })).toMatchObject({
      id: 'a',
      name: 'welcome',
    });
    expect(toDashboardTask(task)).not.toHaveProperty('name');
  });
});

describe('dashboard JSON previews', () => {
  it('sends a value whole up to the limit, and cut (never inside a surrogate pair) past it', () => {
    expect(dashboardJson(undefined)).toBeUndefined();
    expect(dashboardJson(null)).toEqual({ json: 'null', truncated: false, chars: 4 });
    expect(dashboardJson({ a: '<b>' })).toEqual({
      json: '{"a":"<b>"}',
      truncated: false,
      chars: 11,
    });
    // Around the cut: emoji (surrogate pairs) starting at either parity, then any text.
    fc.assert(
      fc.property(
        fc.integer({ min: TASK_JSON_PREVIEW_CHARS - 40, max: TASK_JSON_PREVIEW_CHARS + 5 }),
        fc.string({ unit: 'grapheme', maxLength: 30 }),
        (pad, tail) => {
          const text = `${'a'.repeat(pad)}${'😀'.repeat(15)}${tail}`;
          const preview = dashboardJson(text)!;
          const whole = JSON.stringify(text);
          expect(preview.chars).toBe(whole.length);
          expect(preview.truncated).toBe(whole.length > TASK_JSON_PREVIEW_CHARS);
          expect(preview.json.length).toBeLessThanOrEqual(TASK_JSON_PREVIEW_CHARS);
          expect(whole.startsWith(preview.json)).toBe(true);
          // A lone high surrogate at the end would show as a broken character.
          expect(/[\uD800-\uDBFF]$/.test(preview.json)).toBe(false);
        },
      ),
    );
  });
});

describe('GET api/queues/:queue/tasks: outcomes of tasks, and cancel from the page', () => {
  let app: INestApplication | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  async function startHttp(
    prefix: string,
    options: RedisLockDashboardOptions = {},
    queue: RedisLockModuleOptions['queue'] = {},
  ) {
    const moduleRef = await compileDashboardModule(
      prefix,
      'outcome-app',
      options,
      undefined,
      queue,
    );
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    return { app, url: `${base}/redis-lock/api` };
  }

  async function getJson<T>(url: string): Promise<T> {
    const res = await fetch(url);
    expect([url, res.status]).toEqual([url, 200]);
    return (await res.json()) as T;
  }

  async function post(url: string): Promise<{ status: number; body: unknown }> {
    const res = await fetch(url, { method: 'POST' });
    return { status: res.status, body: await res.json() };
  }

  it('lists a value over 64 KiB by its size alone, which Redis reads without copying the value', async () => {
    const prefix = uniquePrefix('dash-unread');
    const { app, url } = await startHttp(prefix, {}, { maxResultBytes: 1_048_576 });
    const queues = app.get(QueueService);
    // 2 + 3 + 4 UTF-8 bytes per 1 + 1 + 2 characters.
    const payload = { s: 'é€😀'.repeat(10_000) };
    const bytes = Buffer.byteLength(JSON.stringify(payload));
    expect(bytes).toBeGreaterThan(TASK_JSON_READ_BYTES);
    await queues.enqueue('unread', 'huge', { delayMs: 600_000, payload });
    await queues.enqueue('unread', 'small', { delayMs: 600_000, payload: { n: 1 } });
    const list = (state: string) =>
      getJson<DashboardTask[]>(`${url}/queues/unread/tasks?state=${state}`);
    const [huge, small] = await list('delayed');
    expect(huge.payload).toEqual({ json: '', truncated: true, bytes });
    expect(small.payload).toEqual({ json: '{"n":1}', truncated: false, chars: 7 });
    // One task's own endpoint sends the whole value.
    const whole = await getJson<{ payload: unknown }>(`${url}/queues/unread/tasks/huge`);
    expect(whole.payload).toEqual(payload);

    // A completed task's result: listed by its size, with its finish time.
    const worker = queues.process('done', () => payload);
    await queues.enqueue('done', 'big-result');
    await waitFor(
      'big-result completed',
      async () => (await queues.get('done', 'big-result'))?.state === 'completed',
      10_000,
    );
    const [done] = await getJson<DashboardTask[]>(`${url}/queues/done/tasks?state=completed`);
    expect(done.result).toEqual({ json: '', truncated: true, bytes });
    expect(done.finishedAt).toBeGreaterThan(0);
    expect(done.time).toBe(done.finishedAt);
    await worker.close();
  });

  it('lists completed tasks with their result and progress, a running one with its progress, cancelled ones with their error', async () => {
    const prefix = uniquePrefix('dash-outcomes');
    const { app, url } = await startHttp(prefix, { readOnly: false });
    const queues = app.get(QueueService);
    const big = 'x'.repeat(5_000);
    const worker = queues.process('reports', async (task: RunningTask) => {
      if (task.id === 'ok-1') {
        await task.progress({ done: 3, of: 3 });
        return { rows: 3, note: '<img src=x onerror="alert(1)">' };
      }
      if (task.id === 'big') return big;
      // 'run-1' runs until cancelled.
      await task.progress({ done: 1 });
      await new Promise((_, reject) =>
        task.signal.addEventListener('abort', () => reject(task.signal.reason)),
      );
    });
    await queues.enqueue('reports', 'ok-1', { payload: { month: '2024-05' } });
    await queues.enqueue('reports', 'big');
    await queues.enqueue('reports', 'run-1');
    await queues.enqueue('reports', 'later-1', { delayMs: 600_000, payload: { n: 1 } });
    const tasks = (state: string) =>
      getJson<DashboardTask[]>(`${url}/queues/reports/tasks?state=${state}`);
    await waitFor(
      'ok-1 and big completed, run-1 running with its progress',
      async () =>
        (await tasks('completed')).length === 2 &&
        (await tasks('leased'))[0]?.progress?.json === '{"done":1}',
      20_000,
      50,
    );

    const completed = await tasks('completed');
    expect(completed.map((t) => t.id).sort()).toEqual(['big', 'ok-1']);
    const ok = completed.find((t) => t.id === 'ok-1')!;
    expect(ok).toMatchObject({
      state: 'completed',
      attempts: 1,
      result: {
        json: '{"rows":3,"note":"<img src=x onerror=\\"alert(1)\\">"}',
        truncated: false,
      },
      progress: { json: '{"done":3,"of":3}', truncated: false },
      payload: { json: '{"month":"2024-05"}', truncated: false },
    });
    expect(ok.finishedAt).toBeGreaterThan(0);
    expect(ok.time).toBe(ok.finishedAt);
    const cut = completed.find((t) => t.id === 'big')!.result!;
    expect(cut).toEqual({
      json: JSON.stringify(big).slice(0, TASK_JSON_PREVIEW_CHARS),
      truncated: true,
      chars: big.length + 2,
    });
    // One task's own endpoint sends the whole value.
    expect((await getJson<{ result: unknown }>(`${url}/queues/reports/tasks/big`)).result).toBe(
      big,
    );

    // Cancel from the page: the running task is signalled and ends cancelled, the delayed one at once.
    expect(await post(`${url}/queues/reports/tasks/run-1/cancel`)).toEqual({
      status: 200,
      body: { outcome: 'signalled' },
    });
    expect(await post(`${url}/queues/reports/tasks/later-1/cancel`)).toEqual({
      status: 200,
      body: { outcome: 'cancelled' },
    });
    await waitFor(
      'run-1 cancelled',
      async () => (await queues.get('reports', 'run-1'))?.state === 'cancelled',
      20_000,
      50,
    );
    expect(await post(`${url}/queues/reports/tasks/later-1/cancel`)).toEqual({
      status: 200,
      body: { outcome: 'finished' },
    });
    expect(await post(`${url}/queues/reports/tasks/nope/cancel`)).toEqual({
      status: 200,
      body: { outcome: 'not-found' },
    });

    const cancelled = await tasks('cancelled');
    expect(cancelled.map((t) => t.id).sort()).toEqual(['later-1', 'run-1']);
    for (const task of cancelled) {
      expect(task).toMatchObject({
        state: 'cancelled',
        error: { name: 'TaskCancelledError', message: 'cancelled: from the dashboard' },
      });
      // Lists leave the stack out.
      expect(task.error).not.toHaveProperty('stack');
      expect(task.finishedAt).toBeGreaterThan(0);
    }
    expect(cancelled.find((t) => t.id === 'run-1')!.progress?.json).toBe('{"done":1}');
    expect(cancelled.find((t) => t.id === 'later-1')!.payload?.json).toBe('{"n":1}');

    const overview = await getJson<DashboardOverview>(`${url}/overview`);
    expect(overview.queues.find((q) => q.name === 'reports')).toMatchObject({
      ready: 0,
      delayed: 0,
      leased: 0,
      completed: 2,
      cancelled: 2,
      dead: 0,
    });
    await worker.close();
  }, 60_000);

  it('refuses actions a browser sent from another site or origin (403), and lets same-origin and header-less clients through', async () => {
    const prefix = uniquePrefix('dash-cross-site');
    const { app, url } = await startHttp(prefix, { readOnly: false });
    const queues = app.get(QueueService);
    await queues.enqueue('reports', ['c-1', 'c-2', 'c-3']);
    const cancel = (id: string, headers: Record<string, string>) =>
      fetch(`${url}/queues/reports/tasks/${id}/cancel`, { method: 'POST', headers });
    const host = new URL(url).host;
    const refused: Record<string, string>[] = [
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
      { origin: 'https://evil.example' },
      { origin: 'null' },
    ];
    for (const headers of refused) {
      expect([headers, (await cancel('c-1', headers)).status]).toEqual([headers, 403]);
    }
    expect((await queues.get('reports', 'c-1'))?.state).toBe('ready');
    expect(
      (await cancel('c-1', { 'sec-fetch-site': 'same-origin', origin: `http://${host}` })).status,
    ).toBe(200);
    expect((await cancel('c-2', {})).status).toBe(200);
    expect((await queues.get('reports', 'c-2'))?.state).toBe('cancelled');
    const del = await fetch(`${url}/queues/reports/tasks/c-3`, {
      method: 'DELETE',
      headers: { 'sec-fetch-site': 'cross-site' },
    });
    expect(del.status).toBe(403);
  });

  it('takes the queue and the task id in the query too, where "." and ".." survive the URL', async () => {
    const { app, url } = await startHttp(uniquePrefix('dash-dots'), { readOnly: false });
    const queues = app.get(QueueService);
    await queues.enqueue('..', ['.', '..', 'x'], { delayMs: 600_000 });
    const q = (id: string) => `queue=..&id=${encodeURIComponent(id)}`;
    // fetch, as a browser, drops the path segments: api/queues/../tasks/. is api/tasks/.
    expect((await getJson<QueueTaskInfo>(`${url}/task?${q('.')}`)).id).toBe('.');
    expect((await getJson<QueueTaskInfo>(`${url}/task?${q('..')}`)).state).toBe('delayed');
    const listed = await getJson<DashboardTask[]>(`${url}/tasks?queue=..&state=delayed`);
    expect(listed.map((task) => task.id).sort()).toEqual(['.', '..', 'x']);
    expect((await getJson<{ range: string }>(`${url}/history?queue=..`)).range).toBe('1h');
    expect(await post(`${url}/task/cancel?${q('.')}`)).toEqual({
      status: 200,
      body: { outcome: 'cancelled' },
    });
    const removed = await fetch(`${url}/task?${q('..')}`, { method: 'DELETE' });
    expect([removed.status, await removed.json()]).toEqual([200, { removed: true }]);
    expect(await post(`${url}/queue/pause?queue=..`)).toEqual({
      status: 200,
      body: { paused: true },
    });
    expect((await queues.get('..', '.'))?.state).toBe('cancelled');
    expect(await queues.get('..', '..')).toBeUndefined();
    expect((await queues.stats('..')).paused).toBe(true);
    // A repeated parameter is no id: 400, nothing read.
    expect((await fetch(`${url}/task?queue=..&id=.&id=..`)).status).toBe(400);
  });

  it('answers 400 naming a limit above 100 on the task lists, so no page reads 1,000 whole tasks', async () => {
    const { app, url } = await startHttp(uniquePrefix('dash-page-cap'), { readOnly: true });
    await app.get(QueueService).enqueue('big', ['t-1', 't-2']);
    for (const path of [
      'tasks?state=ready&limit=1000',
      'tasks?state=dead&limit=101',
      'dead?limit=1000',
    ]) {
      const res = await fetch(`${url}/queues/big/${path}`);
      const body = (await res.json()) as { message: string };
      const limit = /limit=(\d+)/.exec(path)![1];
      expect([path, res.status, body.message]).toEqual([
        path,
        400,
        `invalid argument 'limit': expected at most 100 tasks on a dashboard page, got '${limit}'`,
      ]);
    }
    const page = await getJson<DashboardTask[]>(`${url}/queues/big/tasks?state=ready&limit=100`);
    expect(page.map((task) => task.id)).toEqual(['t-1', 't-2']);
    expect(await getJson<QueueTaskInfo[]>(`${url}/queues/big/dead?limit=100`)).toEqual([]);
  });

  it('answers 400 for a missing or unknown state, and 403 for a cancel when read-only', async () => {
    const prefix = uniquePrefix('dash-outcomes-ro');
    const { app, url } = await startHttp(prefix, { readOnly: true });
    const queues = app.get(QueueService);
    await queues.enqueue('reports', 'r-1');
    for (const query of ['', '?state=finished', '?state=dead&limit=0']) {
      const res = await fetch(`${url}/queues/reports/tasks${query}`);
      expect([query, res.status]).toEqual([query, 400]);
    }
    expect((await post(`${url}/queues/reports/tasks/r-1/cancel`)).status).toBe(403);
    expect((await queues.get('reports', 'r-1'))?.state).toBe('ready');
    expect(await getJson<DashboardTask[]>(`${url}/queues/reports/tasks?state=ready`)).toEqual([
      {
        id: 'r-1',
        state: 'ready',
        time: expect.any(Number),
        attempts: 0,
        enqueuedAt: expect.any(Number),
      },
    ]);
  });
});
