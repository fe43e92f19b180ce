import 'reflect-metadata';
import { connect } from 'node:net';
import { type CanActivate, ConsoleLogger, type INestApplication, Injectable } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { Test } from '@nestjs/testing';
import {
  QueueService,
  RedisLockDashboardModule,
  RedisLockModule,
  type DashboardOverview,
  type RedisLockDashboardOptions,
} from '../../lib';
import { DASHBOARD_CSP } from '../../lib/dashboard/dashboard-headers.middleware';
import {
  DashboardOverviewThrottle,
  MAX_OVERVIEW_SEARCHES,
} from '../../lib/dashboard/dashboard-overview-throttle';
import type { ResolvedDashboardOptions } from '../../lib/dashboard/dashboard-options';
import type { DashboardService } from '../../lib/dashboard/dashboard.service';
import { compileDashboardModule } from './support/dashboard-module';
import { commandCalls, redisClient, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/** Admits every request: the app has put a guard in front of the page. */
@Injectable()
class AdmitGuard implements CanActivate {
  canActivate(): boolean {
    return true;
  }
}

/** Refuses every request. */
@Injectable()
class RefuseGuard implements CanActivate {
  canActivate(): boolean {
    return false;
  }
}

/** The start-up warning of a dashboard without guards, as the module logs it. */
const unguarded = (readOnly: boolean) =>
  "the dashboard at '/redis-lock' has no guards: it is open to anyone who can reach the app. " +
  (readOnly
    ? 'It is read-only, but read-only still shows'
    : 'readOnly: false lets anyone pause, resume, cancel, delete and requeue, and it shows') +
  " every lock key and every task's payload, result and error. Put a guard in front of it " +
  '(RedisLockDashboardModule.forRoot({ guards: [AdminGuard] })); docs/dashboard.md';

describe('RedisLockDashboardModule hardening', () => {
  // A server of its own, so that the SCAN counts are this file's alone.
  let server: RedisServer;
  let redis: Redis;
  let app: INestApplication | undefined;
  const warnings: string[] = [];

  beforeAll(async () => {
    server = await startRedisServer();
    redis = redisClient(server.url);
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    warnings.length = 0;
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

  /** An HTTP app with the dashboard at /redis-lock; resolves the page's URL. */
  async function start(options: RedisLockDashboardOptions = {}, globalPrefix?: string) {
    const moduleRef = await compileDashboardModule(
      uniquePrefix('dash-hardening'),
      'hardening-app',
      options,
      server.url,
    );
    const logger = new ConsoleLogger();
    logger.warn = (message: unknown) => void warnings.push(String(message));
    logger.log = () => undefined;
    app = moduleRef.createNestApplication({ logger });
    if (globalPrefix) app.setGlobalPrefix(globalPrefix);
    await app.listen(0, '127.0.0.1');
    const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    return { app, base, url: `${base}${globalPrefix ? `/${globalPrefix}` : ''}/redis-lock` };
  }

  /** SCAN calls the server ran since the last CONFIG RESETSTAT. */
  async function scans(): Promise<number> {
    return (await commandCalls(redis)).get('scan') ?? 0;
  }

  it('is read-only without guards: every mutation answers 403 with a JSON reason, and nothing changes', async () => {
    const { app, url } = await start();
    const queues = app.get(QueueService);
    await queues.enqueue('mail', ['m-1', 'm-2']);
    const overview = (await (await fetch(`${url}/api/overview`)).json()) as DashboardOverview;
    expect(overview.readOnly).toBe(true);
    for (const [method, path] of [
      ['POST', 'api/queues/mail/tasks/m-1/requeue'],
      ['POST', 'api/queues/mail/tasks/m-1/cancel'],
      ['DELETE', 'api/queues/mail/tasks/m-2'],
      ['POST', 'api/queues/mail/pause'],
      ['POST', 'api/queues/mail/resume'],
    ]) {
      const res = await fetch(`${url}/${path}`, { method });
      expect([path, res.status, res.headers.get('content-type')]).toEqual([
        path,
        403,
        expect.stringContaining('application/json'),
      ]);
      expect(await res.json()).toEqual({
        statusCode: 403,
        error: 'Forbidden',
        message:
          'the dashboard is read-only: actions need guards in its options, or readOnly: false',
      });
    }
    expect(await queues.stats('mail')).toMatchObject({ ready: 2, cancelled: 0, paused: false });
  });

  it.each<[string, RedisLockDashboardOptions]>([
    ['guards', { guards: [AdmitGuard] }],
    ['readOnly: false', { readOnly: false }],
  ])('takes actions once the app opts in with %s', async (_, options) => {
    const { app, url } = await start(options);
    const queues = app.get(QueueService);
    await queues.enqueue('mail', 'm-1');
    const overview = (await (await fetch(`${url}/api/overview`)).json()) as DashboardOverview;
    expect(overview.readOnly).toBe(false);
    expect(
      (await fetch(`${url}/api/queues/mail/tasks/m-1/cancel`, { method: 'POST' })).status,
    ).toBe(200);
    expect((await fetch(`${url}/api/queues/mail/pause`, { method: 'POST' })).status).toBe(200);
    expect(await queues.stats('mail')).toMatchObject({ cancelled: 1, paused: true });
  });

  it.each<[string, RedisLockDashboardOptions, string[]]>([
    ['no guards', {}, [unguarded(true)]],
    ['no guards and readOnly: false', { readOnly: false }, [unguarded(false)]],
    ['guards', { guards: [AdmitGuard] }, []],
  ])('at start, with %s, logs the warnings expected', async (_, options, expected) => {
    await start(options);
    expect(warnings).toEqual(expected);
  });

  it('sends X-Frame-Options: DENY and the CSP on every response, refusals and errors included', async () => {
    const refusing = await start({ guards: [RefuseGuard] });
    const refused = [await fetch(refusing.url), await fetch(`${refusing.url}/api/overview`)];
    await refusing.app.close();
    const { url: open } = await start();
    const responses: Array<[string, Response]> = [
      ['page', await fetch(open)],
      ['asset', await fetch(`${open}/assets/dashboard.js`)],
      ['overview', await fetch(`${open}/api/overview`)],
      ['unknown asset (404)', await fetch(`${open}/assets/nope.js`)],
      ['no such route (404)', await fetch(`${open}/api/nope/deeper`)],
      ['bad state (400)', await fetch(`${open}/api/queues/mail/tasks?state=nope`)],
      ['read-only (403)', await fetch(`${open}/api/queues/mail/pause`, { method: 'POST' })],
      ['guard refused page (403)', refused[0]],
      ['guard refused api (403)', refused[1]],
    ];
    for (const [what, res] of responses) {
      expect([
        what,
        res.headers.get('x-frame-options'),
        res.headers.get('content-security-policy'),
      ]).toEqual([what, 'DENY', DASHBOARD_CSP]);
    }
    expect(responses.map(([what, res]) => [what, res.status])).toEqual([
      ['page', 200],
      ['asset', 200],
      ['overview', 200],
      ['unknown asset (404)', 404],
      ['no such route (404)', 404],
      ['bad state (400)', 400],
      ['read-only (403)', 403],
      ['guard refused page (403)', 403],
      ['guard refused api (403)', 403],
    ]);
    expect(DASHBOARD_CSP).toContain("frame-ancestors 'none'");
    expect(DASHBOARD_CSP).toContain("default-src 'self'");
  });

  it('sends them under a global prefix too, and on no path outside the dashboard', async () => {
    const { base, url } = await start({}, 'api');
    const headers = async (path: string) => {
      const res = await fetch(path);
      return [
        res.status,
        res.headers.get('x-frame-options'),
        res.headers.get('content-security-policy'),
      ];
    };
    expect(await headers(url)).toEqual([200, 'DENY', DASHBOARD_CSP]);
    expect(await headers(`${url}/api/overview`)).toEqual([200, 'DENY', DASHBOARD_CSP]);
    expect(await headers(`${url}/no/such/route`)).toEqual([404, 'DENY', DASHBOARD_CSP]);
    expect(await headers(`${base}/api/redis-lock-other/x`)).toEqual([404, null, null]);
    expect(await headers(`${base}/api/elsewhere`)).toEqual([404, null, null]);
    expect(await headers(`${base}/redis-lock/x`)).toEqual([404, null, null]);
  });

  it('takes <base href> from the parsed path, never from an absolute-form request target', async () => {
    const { url } = await start();
    const { port } = new URL(url);
    for (const target of [
      'http://evil.example/redis-lock',
      'http://evil.example/redis-lock/?x=1',
    ]) {
      const reply = await rawGet(Number(port), target);
      expect([target, reply.split('\r\n')[0]]).toEqual([target, 'HTTP/1.1 200 OK']);
      expect(reply).toContain('<base href="/redis-lock/" />');
      expect(reply).not.toContain('evil.example');
    }
  });

  it('answers 503 "Redis unavailable" when Redis does not answer, and logs no stack per poll', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedisLockModule.forRoot({
          redis: server.url,
          keyPrefix: uniquePrefix('dash-outage'),
          commandTimeoutMs: 200,
        }),
        RedisLockDashboardModule.forRoot({ queues: ['orders'] }),
      ],
    }).compile();
    const errors: string[] = [];
    const logger = new ConsoleLogger();
    logger.error = (message: unknown) => void errors.push(String(message));
    logger.warn = logger.log = () => undefined;
    app = moduleRef.createNestApplication({ logger });
    await app.listen(0, '127.0.0.1');
    const url = `${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/redis-lock/api`;
    await redis.call('CLIENT', 'PAUSE', '1000', 'ALL');
    const [tasks, overview] = await Promise.all([
      fetch(`${url}/queues/orders/tasks?state=dead`),
      fetch(`${url}/overview`),
    ]);
    expect([tasks.status, await tasks.json()]).toEqual([
      503,
      {
        statusCode: 503,
        error: 'Service Unavailable',
        message: 'Redis unavailable (queue inspect)',
      },
    ]);
    expect(overview.status).toBe(503);
    expect(((await overview.json()) as { message: string }).message).toMatch(
      /^Redis unavailable \(.+\)$/,
    );
    expect(errors).toEqual([]);
  });

  it('computes the overview once for 20 concurrent clients: 2 SCANs, as for one', async () => {
    const { url } = await start({ overviewIntervalMs: 60_000 });
    await redis.config('RESETSTAT');
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => fetch(`${url}/api/overview`)),
    );
    expect(answers.map((res) => res.status)).toEqual(Array(20).fill(200));
    const bodies = (await Promise.all(answers.map((res) => res.json()))) as DashboardOverview[];
    expect(new Set(bodies.map((body) => body.now)).size).toBe(1);
    // One SCAN for the held locks, one for the queues (a near-empty server: one call each).
    expect(await scans()).toBe(2);
    // Within the interval, a later caller gets the same overview too.
    expect((await fetch(`${url}/api/overview`)).status).toBe(200);
    expect(await scans()).toBe(2);
  });

  it('shares an overview while it runs, however long a slow Redis makes it: one computation for callers past the interval', async () => {
    const { url } = await start({ overviewIntervalMs: 300 });
    await redis.config('RESETSTAT');
    // Redis stalls for 1.2 s: the first computation runs that long; callers keep coming.
    await redis.call('CLIENT', 'PAUSE', '1200', 'ALL');
    const answers: Promise<Response>[] = [];
    for (let i = 0; i < 3; i++) {
      answers.push(fetch(`${url}/api/overview`));
      await new Promise((resolve) => setTimeout(resolve, 400));
    }
    expect((await Promise.all(answers)).map((res) => res.status)).toEqual([200, 200, 200]);
    // One computation: a SCAN for the held locks, one for the queues.
    expect(await scans()).toBe(2);
  });

  it(`answers 429 once ${MAX_OVERVIEW_SEARCHES} searches hold a turn, without scanning for it`, async () => {
    const { url } = await start({ overviewIntervalMs: 60_000 });
    await redis.config('RESETSTAT');
    // The first search is computed at once; the next ones wait for their turns, a minute apart.
    expect((await fetch(`${url}/api/overview?q=s0`)).status).toBe(200);
    expect(await scans()).toBe(2);
    const statuses: number[] = [];
    const bodies: Array<{ message: string }> = [];
    const waiting = Array.from({ length: MAX_OVERVIEW_SEARCHES + 3 }, (_, i) =>
      fetch(`${url}/api/overview?q=s${i + 1}`)
        .then(async (res) => {
          statuses.push(res.status);
          bodies.push((await res.json()) as { message: string });
        })
        .catch(() => undefined),
    );
    // 7 of the 11 hold a turn beside s0; 4 are refused at once.
    await waitFor('4 refusals', () => statuses.length === 4);
    expect(statuses).toEqual([429, 429, 429, 429]);
    expect(bodies[0].message).toMatch(
      new RegExp(
        `^dashboard overview for search 's\\d+' refused: ${MAX_OVERVIEW_SEARCHES} other ` +
          'searches hold a turn already, the most allowed \\(overviews start at least 60000 ms ' +
          'apart\\); try again later$',
      ),
    );
    expect(await scans()).toBe(2);
    // Closing the app refuses the waiting searches at once (503): none waits out its turn.
    await app!.close();
    app = undefined;
    await Promise.all(waiting);
    expect(statuses.slice(4)).toEqual(Array(MAX_OVERVIEW_SEARCHES - 1).fill(503));
    expect(await scans()).toBe(2);
  });
});

/** Sends `GET <target>` with `target` written as is (e.g. in absolute form); resolves the reply. */
function rawGet(port: number, target: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (reply += chunk));
    socket.on('end', () => resolve(reply));
    socket.on('error', reject);
    socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
  });
}

describe('DashboardOverviewThrottle', () => {
  afterEach(() => jest.useRealTimers());

  it('times its shared overviews and turns by a monotonic clock: a wall clock stepped back changes nothing', async () => {
    jest.useFakeTimers();
    let computed = 0;
    const dashboard = { overview: async () => ({ computed: ++computed }) };
    const throttle = new DashboardOverviewThrottle(
      { overviewIntervalMs: 500 } as ResolvedDashboardOptions,
      dashboard as unknown as DashboardService,
    );
    expect(await throttle.overview('')).toEqual({ computed: 1 });
    await jest.advanceTimersByTimeAsync(600);
    // An NTP step or a VM resume sets the wall clock 10 minutes back; the monotonic one goes on.
    jest.setSystemTime(Date.now() - 600_000);
    expect(await throttle.overview('')).toEqual({ computed: 2 });
    await jest.advanceTimersByTimeAsync(600);
    // A new search gets its turn at once, not 10 minutes later.
    let answered = false;
    const search = throttle.overview('x').then(() => (answered = true));
    await jest.advanceTimersByTimeAsync(0);
    expect(answered).toBe(true);
    await search;
    expect(computed).toBe(3);
  });
});
