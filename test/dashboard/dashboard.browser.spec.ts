import 'reflect-metadata';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type CanActivate,
  type ExecutionContext,
  Injectable,
  type INestApplication,
} from '@nestjs/common';
import type { Browser, Page } from 'playwright-core';
import {
  LockService,
  LockTimeoutError,
  QueueService,
  type RedisLockDashboardOptions,
  type RunningTask,
} from '../../lib';
import { lineFrom, spawnTs } from '../support/child';
import { chromiumPath, launchChromium } from '../support/chromium';
import { compileDashboardModule } from './support/dashboard-module';
import {
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitFor,
  waitForLine,
  waitForLocalWaiters,
} from '../support/helpers';

const executablePath = chromiumPath();
if (!executablePath) {
  console.warn(
    'SKIPPED: the dashboard browser tests need Chromium, which could not be found or installed ' +
      '(scripts/ensure-chromium.sh; set CHROMIUM_BIN to use another binary)',
  );
}
const suite = executablePath ? describe : describe.skip;

/** Generous: a loaded 2-core machine runs browsers, Nest apps and child processes at once. */
const UI_MS = 30_000;
/**
 * A child's start-up, up to its first line: loading the library through ts-node alone took 10 s
 * at a load of 15-20 on the 2-core machine, and the first test starts three children at once.
 */
const START_MS = 90_000;
/** A test that starts processes: several ts-node start-ups on a loaded machine. */
const PROCESS_TEST_MS = 180_000;

/** Admits requests carrying `x-ops-token: let-me-in` only. */
@Injectable()
class OpsTokenGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    return context.switchToHttp().getRequest().headers['x-ops-token'] === 'let-me-in';
  }
}

suite('RedisLockDashboardModule in Chromium', () => {
  let browser: Browser;
  const apps: INestApplication[] = [];
  const redis = redisClient();

  beforeAll(async () => {
    browser = await launchChromium(executablePath!);
  }, 30_000);

  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });

  afterAll(async () => {
    await browser?.close();
    redis.disconnect();
  });

  /** An HTTP app with the lock module (under `prefix`) and the dashboard; resolves its page URL. */
  async function startApp(prefix: string, options: RedisLockDashboardOptions = {}) {
    const moduleRef = await compileDashboardModule(prefix, 'dashboard-app', options);
    const app = moduleRef.createNestApplication({ logger: false });
    apps.push(app);
    await app.listen(0, '127.0.0.1');
    const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    return { app, url: `${base}${options.path ?? '/redis-lock'}` };
  }

  async function openPage(url: string): Promise<Page> {
    const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    page.setDefaultTimeout(UI_MS);
    const response = await page.goto(url);
    expect(response?.status()).toBe(200);
    return page;
  }

  /** A new page that collects CSP refusals and script errors in `problems`. */
  async function watchedPage(): Promise<{ page: Page; problems: string[] }> {
    const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    page.setDefaultTimeout(UI_MS);
    const problems: string[] = [];
    page.on('console', (msg) => {
      if (/Content Security Policy|Refused to/i.test(msg.text())) problems.push(msg.text());
    });
    page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
    return { page, problems };
  }

  /** A task of `queue` in the dead-letter set: claimed once and failed with maxAttempts 1. */
  async function deadTask(queues: QueueService, queue: string, id: string): Promise<void> {
    await queues.enqueue(queue, id, { payload: { to: `${id}@example.com` } });
    const [task] = await queues.claim(queue, 1, { maxAttempts: 1 });
    expect(await queues.nack(task, { maxAttempts: 1 })).toBe('dead');
  }

  it(
    'shows a lock held by another process with its owner and a line of 2 waiters, and drops it once released',
    async () => {
      const prefix = uniquePrefix('dash-lock');
      const key = 'order:42';
      const { app, url } = await startApp(prefix);
      const env = { REDIS_URL: testRedisUrl(), PREFIX: prefix, KEY: key };
      const child = (MODE: string, INSTANCE_ID: string) =>
        spawnTs('test/fixtures/dashboard-child.ts', [], { ...env, MODE, INSTANCE_ID });
      // All three start together (start-up is the slow part on a loaded machine).
      const holder = child('hold', 'holder-proc');
      const waiters = [child('wait', 'waiter-1'), child('wait', 'waiter-2')];
      await Promise.all([
        lineFrom(holder, /^held$/, START_MS),
        ...waiters.map((w) => lineFrom(w, /^ready$/, START_MS)),
      ]);
      for (const [i, waiter] of waiters.entries()) {
        waiter.kill('SIGUSR2');
        // One at a time, so that the line's order is known.
        await waitForLine(redis, prefix, key, i + 1, UI_MS);
      }
      // A timeout of this app while the lock is held: it goes to the "recent" list.
      await expect(app.get(LockService).acquire(key, { waitMs: 50 })).rejects.toThrow(
        LockTimeoutError,
      );

      const page = await openPage(url);
      const row = page.locator(`tr[data-testid="lock-row"][data-key="${key}"]`);
      await row.waitFor();
      expect(await row.getByTestId('owner').textContent()).toBe('holder-proc');
      await waitFor(
        'the line waiter-1, waiter-2 on the page',
        async () =>
          (await row.getByTestId('waiter').allTextContents())
            .map((text) => text.trim().split(' ')[0])
            .join(',') === 'waiter-1,waiter-2',
        UI_MS,
        50,
      );
      const event = page.locator('tr[data-testid="event-row"]', { hasText: key });
      await event.waitFor();
      expect(await event.textContent()).toContain('dashboard-app');

      const acquired = waiters.map((w) => lineFrom(w, /^acquired$/, UI_MS));
      holder.kill('SIGTERM');
      await Promise.all(acquired);
      await row.waitFor({ state: 'detached' });
      await page.close();
    },
    PROCESS_TEST_MS,
  );

  it('shows two callers waiting behind a holder of their own instance as "2 waiting here", with no line', async () => {
    const prefix = uniquePrefix('dash-cohort');
    const key = 'order:43';
    const { app, url } = await startApp(prefix);
    const locks = app.get(LockService);
    const holder = await locks.acquire(key, { ttlMs: 60_000 });
    const waiters = [1, 2].map(() =>
      locks.withLock(key, async () => undefined, { waitMs: 60_000 }),
    );
    await waitForLocalWaiters(locks, key, 2);

    const page = await openPage(url);
    const row = page.locator(`tr[data-testid="lock-row"][data-key="${key}"]`);
    await row.waitFor();
    const here = row.locator('[data-testid="local-waiters"][data-instance="dashboard-app"]');
    await here.waitFor();
    expect((await here.textContent())?.replace(/\s+/g, ' ').trim()).toBe(
      'dashboard-app 2 waiting here',
    );
    expect(await row.getByTestId('line').count()).toBe(0);

    await holder.release();
    await Promise.all(waiters);
    await row.waitFor({ state: 'detached' });
    await page.close();
  });

  it(
    'requeues a dead task on a click, and a worker process then runs it',
    async () => {
      const prefix = uniquePrefix('dash-queue');
      const { app, url } = await startApp(prefix, { readOnly: false });
      await deadTask(app.get(QueueService), 'mail', 'm-1');
      const worker = spawnTs('test/fixtures/dashboard-child.ts', [], {
        REDIS_URL: testRedisUrl(),
        PREFIX: prefix,
        MODE: 'worker',
        QUEUE: 'mail',
      });
      await lineFrom(worker, /^started$/, START_MS);

      const page = await openPage(`${url}#queues`);
      const queueRow = page.locator('tr[data-testid="queue-row"][data-queue="mail"]');
      await queueRow.waitFor();
      expect(await queueRow.getByTestId('dead').textContent()).toBe('1');
      // The worker of the other process, from the registry every instance writes.
      const workerRow = page.locator(
        `tr[data-testid="worker-row"][data-instance$=":${worker.pid}"]`,
      );
      await workerRow.waitFor();
      expect(await page.locator('tr[data-testid="worker-row"]').count()).toBe(1);
      const deadRow = page.locator('tr[data-testid="dead-row"][data-id="m-1"]');
      await deadRow.waitFor();
      expect(await deadRow.textContent()).toContain('m-1@example.com');

      const processed = lineFrom(worker, /^processed m-1$/, UI_MS);
      await deadRow.getByTestId('requeue').click();
      await processed;
      await deadRow.waitFor({ state: 'detached' });
      await waitFor(
        'a dead count of 0',
        async () => (await queueRow.getByTestId('dead').textContent()) === '0',
        UI_MS,
        50,
      );
      await page.close();
    },
    PROCESS_TEST_MS,
  );

  it('shows completed tasks with their result and progress as text, cut, and cancels a delayed task on a click', async () => {
    const prefix = uniquePrefix('dash-outcome');
    const { app, url } = await startApp(prefix, { readOnly: false });
    const queues = app.get(QueueService);
    const worker = queues.process('reports', async (task: RunningTask) => {
      await task.progress({ done: 3, of: 3 });
      return task.id === 'ok-1'
        ? { rows: 3, note: '<img src=x onerror="window.__injected = 1">' }
        : 'y'.repeat(5_000);
    });
    await queues.enqueue('reports', ['ok-1', 'big']);
    await queues.enqueue('reports', 'later-1', { delayMs: 600_000 });
    await waitFor(
      'ok-1 and big completed',
      async () => (await queues.stats('reports')).completed === 2,
      UI_MS,
      50,
    );

    const page = await openPage(`${url}#queues`);
    const queueRow = page.locator('tr[data-testid="queue-row"][data-queue="reports"]');
    await queueRow.click();
    expect(await queueRow.getByTestId('completed').textContent()).toBe('2');
    expect(await queueRow.getByTestId('delayed').textContent()).toBe('1');
    await page.getByTestId('state-completed').click();
    const ok = page.locator('tr[data-testid="completed-row"][data-id="ok-1"]');
    await ok.waitFor();
    // The result is text on the page: its markup is shown, never made into an element.
    expect(await ok.getByTestId('result').textContent()).toBe(
      '{"rows":3,"note":"<img src=x onerror=\\"window.__injected = 1\\">"}',
    );
    expect(await ok.getByTestId('progress').textContent()).toBe('{"done":3,"of":3}');
    expect(await ok.locator('img').count()).toBe(0);
    expect(await page.evaluate('typeof window.__injected')).toBe('undefined');
    // A long result: the cell shows its first 120 characters, the tooltip the 1,000 sent.
    const big = page
      .locator('tr[data-testid="completed-row"][data-id="big"]')
      .getByTestId('result');
    expect(await big.textContent()).toBe(`"${'y'.repeat(119)}…`);
    expect(await big.getAttribute('title')).toBe(`"${'y'.repeat(999)}… (5002 characters in all)`);

    // The task search shows the whole result.
    await page.getByTestId('task-search').fill('ok-1');
    await page.getByRole('button', { name: 'Find' }).click();
    const result = page.getByTestId('task-result');
    await result.waitFor();
    expect(JSON.parse((await result.textContent())!)).toEqual({
      rows: 3,
      note: '<img src=x onerror="window.__injected = 1">',
    });
    expect(await page.getByTestId('task-state').textContent()).toBe('completed');

    // Cancel: the delayed task leaves its list and shows in the cancelled one with its reason.
    await page.getByTestId('state-delayed').click();
    const later = page.locator('tr[data-testid="delayed-row"][data-id="later-1"]');
    page.once('dialog', (dialog) => void dialog.accept());
    await later.getByTestId('cancel').click();
    await later.waitFor({ state: 'detached' });
    await waitFor(
      'a cancelled count of 1',
      async () => (await queueRow.getByTestId('cancelled').textContent()) === '1',
      UI_MS,
      50,
    );
    await page.getByTestId('state-cancelled').click();
    const cancelled = page.locator('tr[data-testid="cancelled-row"][data-id="later-1"]');
    await cancelled.waitFor();
    expect((await cancelled.getByTestId('detail').textContent())?.trim()).toBe(
      'TaskCancelledError cancelled: from the dashboard',
    );
    expect((await queues.get('reports', 'later-1'))?.state).toBe('cancelled');
    await page.close();
    await worker.close();
  });

  it('finds, cancels and deletes tasks with the ids "." and "..", in a queue named "..", and pauses it', async () => {
    const prefix = uniquePrefix('dash-dots');
    const { app, url } = await startApp(prefix, { readOnly: false });
    const queues = app.get(QueueService);
    await queues.enqueue('..', ['.', '..'], { payload: { n: 1 }, delayMs: 600_000 });
    // Over 64 KiB: the list shows its size alone.
    await queues.enqueue('..', 'huge', { payload: { s: 'x'.repeat(70_000) }, delayMs: 600_000 });

    const { page, problems } = await watchedPage();
    await page.goto(`${url}#queues`);
    const queueRow = page.locator('tr[data-testid="queue-row"][data-queue=".."]');
    await queueRow.click();
    await page.locator('[data-testid="history-totals"][data-range="1h"]').waitFor();
    await page.getByTestId('state-delayed').click();
    const row = (id: string) => page.locator(`tr[data-testid="delayed-row"][data-id="${id}"]`);
    await row('.').waitFor();
    await row('..').waitFor();
    expect(await row('.').getByTestId('payload').textContent()).toBe('{"n":1}');
    expect(await row('huge').getByTestId('payload').textContent()).toBe('70,008 bytes');

    await page.getByTestId('task-search').fill('..');
    await page.getByRole('button', { name: 'Find' }).click();
    await page.getByTestId('task-state').waitFor();
    expect(await page.getByTestId('task-state').textContent()).toBe('delayed');

    page.once('dialog', (dialog) => void dialog.accept());
    await row('.').getByTestId('cancel').click();
    await row('.').waitFor({ state: 'detached' });
    page.once('dialog', (dialog) => void dialog.accept());
    await row('..').getByTestId('delete').click();
    await row('..').waitFor({ state: 'detached' });
    await queueRow.getByTestId('pause').click();
    await queueRow.getByTestId('resume').waitFor();

    expect((await queues.get('..', '.'))?.state).toBe('cancelled');
    expect(await queues.get('..', '..')).toBeUndefined();
    expect((await queues.stats('..')).paused).toBe(true);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('read-only: shows no buttons, and the mutation endpoints answer 403', async () => {
    const prefix = uniquePrefix('dash-ro');
    const { app, url } = await startApp(prefix, { readOnly: true, path: '/ops/locks' });
    const queues = app.get(QueueService);
    await deadTask(queues, 'mail', 'm-2');

    const page = await openPage(`${url}#queues`);
    await page.locator('tr[data-testid="dead-row"][data-id="m-2"]').waitFor();
    await page.getByTestId('read-only').waitFor();
    // The state tabs of the task list are the only other buttons.
    expect(await page.locator('button:not([role="tab"])').allTextContents()).toEqual([
      'Locks',
      'Queues',
      'Find',
    ]);
    await page.close();

    await queues.enqueue('mail', 'm-3');
    for (const [method, path] of [
      ['POST', 'api/queues/mail/tasks/m-2/requeue'],
      ['DELETE', 'api/queues/mail/tasks/m-2'],
      ['POST', 'api/queues/mail/tasks/m-3/cancel'],
      ['POST', 'api/queues/mail/pause'],
    ]) {
      expect((await fetch(`${url}/${path}`, { method })).status).toBe(403);
    }
    expect((await queues.get('mail', 'm-2'))?.state).toBe('dead');
    expect((await queues.get('mail', 'm-3'))?.state).toBe('ready');
    expect((await queues.stats('mail')).paused).toBe(false);
  });

  it('a refusing guard answers 403 for the page, its assets and every data endpoint', async () => {
    const prefix = uniquePrefix('dash-guard');
    const { url } = await startApp(prefix, { guards: [OpsTokenGuard] });
    const page = await browser.newPage();
    expect((await page.goto(url))?.status()).toBe(403);
    await page.close();
    const endpoints: Array<[string, string]> = [
      ['GET', ''],
      ['GET', '/assets/dashboard.js'],
      ['GET', '/api/overview'],
      ['GET', '/api/queues/mail/dead'],
      ['GET', '/api/queues/mail/tasks?state=completed'],
      ['GET', '/api/queues/mail/tasks/x'],
      ['POST', '/api/queues/mail/tasks/x/requeue'],
      ['POST', '/api/queues/mail/tasks/x/cancel'],
      ['DELETE', '/api/queues/mail/tasks/x'],
      ['POST', '/api/queues/mail/pause'],
      ['POST', '/api/queues/mail/resume'],
    ];
    for (const [method, path] of endpoints) {
      expect([path, (await fetch(`${url}${path}`, { method })).status]).toEqual([path, 403]);
    }
    // The same guard admits the operator's token: it is the guard that refused.
    const admitted = await fetch(`${url}/api/overview`, {
      headers: { 'x-ops-token': 'let-me-in' },
    });
    expect(admitted.status).toBe(200);
  });

  it('renders under its CSP with no violation: read-only by default, no action button, sparkline drawn', async () => {
    const prefix = uniquePrefix('dash-csp');
    const { app, url } = await startApp(prefix);
    await deadTask(app.get(QueueService), 'mail', 'm-9');
    const { page, problems } = await watchedPage();
    page.on('requestfailed', (req) => problems.push(`failed: ${req.url()}`));
    // Chromium asks for /favicon.ico, which the app does not serve; every file of the page loads.
    page.on('response', (res) => {
      if (res.status() >= 400 && !res.url().endsWith('/favicon.ico')) {
        problems.push(`${res.status()}: ${res.url()}`);
      }
    });
    const response = await page.goto(`${url}#queues`);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    await page.locator('tr[data-testid="dead-row"][data-id="m-9"]').waitFor();
    await page.getByTestId('read-only').waitFor();
    // uPlot drew the queue's sparkline (a script and a style sheet of the page, under the CSP).
    await page.locator('tr[data-testid="queue-row"][data-queue="mail"] canvas').waitFor();
    expect(await page.getByTestId('requeue').count()).toBe(0);
    expect(problems).toEqual([]);
    await page.close();
  });

  it("draws a queue's 1 h / 24 h / 14 d history charts (uPlot, under the page's CSP) from QueueService.metrics", async () => {
    const prefix = uniquePrefix('dash-history');
    const { app, url } = await startApp(prefix);
    const queues = app.get(QueueService);
    await deadTask(queues, 'hist', 'h-dead');
    await queues.enqueue('hist', ['h1', 'h2', 'h3', 'h4']);
    for (const task of await queues.claim('hist', 4)) expect(await queues.ack(task)).toBe(true);
    // What the instance writes once a minute, written now.
    await queues.store.metrics.flush(true);

    const { page, problems } = await watchedPage();
    await page.goto(`${url}#queues`);
    await page.locator('tr[data-testid="queue-row"][data-queue="hist"]').click();
    const history = page.getByTestId('history');
    await history.locator('canvas').waitFor();
    for (const range of ['1h', '24h', '14d']) {
      await page.getByTestId(`history-${range}`).click();
      await page.locator(`[data-testid="history-totals"][data-range="${range}"]`).waitFor();
      expect(await page.getByTestId('history-completed').textContent()).toBe('4');
      expect(await page.getByTestId('history-dead').textContent()).toBe('1');
      await history.locator('canvas').waitFor();
    }
    expect(problems).toEqual([]);
    await page.close();
  });

  it('is not rendered in a frame of a page on another origin', async () => {
    const prefix = uniquePrefix('dash-frame');
    const { url } = await startApp(prefix, { readOnly: false });
    // The attacker's page: another port of 127.0.0.1, so another origin.
    const evil: Server = createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(`<!doctype html><iframe id="victim" src="${url}" width="800" height="600"></iframe>`);
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    try {
      const page = await browser.newPage();
      page.setDefaultTimeout(UI_MS);
      const refusals: string[] = [];
      page.on('console', (msg) => {
        if (/frame/i.test(msg.text())) refusals.push(msg.text());
      });
      const { port } = evil.address() as AddressInfo;
      // 'load' waits for the iframe's own load (or its error page).
      expect((await page.goto(`http://127.0.0.1:${port}/`))?.status()).toBe(200);
      const frame = page.frames().find((f) => f !== page.mainFrame());
      expect(frame).toBeDefined();
      expect(await frame!.locator('main#app').count()).toBe(0);
      expect(frame!.url()).not.toBe(url);
      expect(refusals.join('\n')).toContain(
        `violates the following Content Security Policy directive: "frame-ancestors 'none'"`,
      );
      await page.close();
    } finally {
      await new Promise((resolve) => evil.close(resolve));
    }
  });
});
