// Writes docs/images/dashboard-locks.png and docs/images/dashboard-queues.png: the dashboard of
// an app with realistic traffic (three instances holding and waiting for locks, workers on four
// queues, dead letters, a paused queue), shot in headless Chromium.
//   node -r ts-node/register/transpile-only scripts/dashboard-screenshots.ts
import 'reflect-metadata';
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type INestApplication, type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import {
  type Lock,
  LockService,
  QueueService,
  RedisLockDashboardModule,
  RedisLockModule,
} from '../lib';
import { chromiumPath, launchChromium } from '../test/support/chromium';
import { startRedisServer } from './redis-server';

const OUT = join(__dirname, '..', 'docs', 'images');
const PREFIX = 'shop:';
/** Seconds of queue traffic before the shots, so that the sparklines have a shape. */
const TRAFFIC_S = 25;

async function instance(url: string, instanceId: string): Promise<INestApplicationContext> {
  @Module({ imports: [RedisLockModule.forRoot({ redis: url, keyPrefix: PREFIX, instanceId })] })
  class InstanceModule {}
  return NestFactory.createApplicationContext(InstanceModule, { logger: false });
}

async function dashboardApp(url: string): Promise<INestApplication> {
  @Module({
    imports: [
      RedisLockModule.forRoot({
        redis: url,
        keyPrefix: PREFIX,
        instanceId: 'api-7f9c',
        isGlobal: true,
      }),
      RedisLockDashboardModule.forRoot({ path: '/redis-lock' }),
    ],
  })
  class DashboardAppModule {}
  const app = await NestFactory.create(DashboardAppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  return app;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const executablePath = chromiumPath();
  if (!executablePath) throw new Error('no Chromium (see scripts/ensure-chromium.sh)');
  const server = await startRedisServer();
  const app = await dashboardApp(server.url);
  const others = await Promise.all(
    ['api-31d2', 'worker-a81e'].map((id) => instance(server.url, id)),
  );
  const [api, worker] = others;
  const locks = app.get(LockService);
  const held: Lock[] = [];

  // Queues: steady emails, failing webhooks, a paused report queue, delayed thumbnails.
  const queues = app.get(QueueService);
  const workerQueues = worker.get(QueueService);
  const handles = [
    queues.process('emails', () => pause(20 + Math.random() * 60), { concurrency: 4 }),
    workerQueues.process('emails', () => pause(30), { concurrency: 2 }),
    queues.process(
      'webhooks',
      async (task) => {
        if (String(task.id).endsWith('3') || String(task.id).endsWith('7')) {
          throw new Error('POST https://hooks.example.com/orders answered 502 Bad Gateway');
        }
        await pause(40);
      },
      { maxAttempts: 2, backoffMs: 200, concurrency: 2 },
    ),
  ];
  await queues.pause('reports');
  await queues.enqueue('reports', ['daily-2026-11-22', 'weekly-47', 'stock-valuation'], {
    payload: { format: 'pdf' },
  });
  await queues.enqueue(
    'thumbnails',
    Array.from({ length: 12 }, (_, i) => `img-${4400 + i}`),
    { delayMs: 600_000 },
  );
  let n = 0;
  const started = Date.now();
  while (Date.now() - started < TRAFFIC_S * 1000) {
    const burst = 5 + Math.round(10 * (1 + Math.sin((Date.now() - started) / 4000)));
    const ids = Array.from({ length: burst }, () => `msg-${++n}`);
    await queues.enqueue('emails', ids, { payload: { to: 'customer@example.com' } });
    if (n % 3 === 0) {
      await queues.enqueue('webhooks', `evt-${n}`, {
        payload: { type: 'order.paid', orderId: 1000 + n },
      });
    }
    await pause(250);
  }
  // A trickle while the shots are taken, so that the sparklines end in live traffic.
  const trickle = setInterval(() => {
    void queues.enqueue(
      'emails',
      Array.from({ length: 6 }, () => `msg-${++n}`),
    );
  }, 250);

  // Locks: a contended order with two instances in line, a fenced stock lock, a nightly report.
  held.push(await api.get(LockService).acquire('order:1042', { ttlMs: 30_000 }));
  const waiting = [
    locks.acquire('order:1042', { waitMs: 120_000 }),
    worker.get(LockService).acquire('order:1042', { waitMs: 120_000 }),
  ];
  held.push(await worker.get(LockService).acquire('stock:sku-778', { fencing: true }));
  held.push(await locks.acquire('report:daily-sales', { ttlMs: 300_000 }));
  // A lock whose key someone deleted by hand: its next extension finds it gone (lock.lost).
  await locks.acquire('payment:pi_3Nc9', { ttlMs: 1_500 }); // auto-extended every 500 ms
  const redis = new Redis(server.url);
  await redis.del(`${PREFIX}lock:{payment:pi_3Nc9}`);
  redis.disconnect();
  for (const key of ['stock:sku-778', 'order:1042']) {
    await locks.acquire(key, { waitMs: 150 }).catch(() => undefined);
  }
  await api
    .get(LockService)
    .acquire('stock:sku-778', { waitMs: 400 })
    .catch(() => undefined);

  const browser = await launchChromium(executablePath);
  const page = await browser.newPage({ viewport: { width: 1200, height: 720 } });
  const url = `${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/redis-lock`;
  mkdirSync(OUT, { recursive: true });
  await page.goto(url);
  await page.locator('[data-testid="waiter"]').nth(1).waitFor();
  await page.locator('[data-testid="event-row"]', { hasText: 'lost' }).waitFor();
  await pause(4_000); // a few polls: "held for" grows from the first sight
  await page.screenshot({ path: join(OUT, 'dashboard-locks.png'), fullPage: true });
  await page.getByTestId('tab-queues').click();
  await page.locator('tr[data-queue="webhooks"]').click();
  await page.locator('[data-testid="dead-row"]').first().waitFor();
  await pause(1_500); // one more poll: the sparklines get their last second
  await page.screenshot({ path: join(OUT, 'dashboard-queues.png'), fullPage: true });
  await browser.close();
  clearInterval(trickle);
  for (const name of ['dashboard-locks.png', 'dashboard-queues.png']) {
    console.log(`${join('docs/images', name)}: ${statSync(join(OUT, name)).size} bytes`);
  }

  await Promise.all(handles.map((h) => h.close()));
  await Promise.all(held.map((l) => l.release().catch(() => undefined)));
  await Promise.all(waiting.map((w) => w.then((l) => l.release()).catch(() => undefined)));
  await Promise.all([app.close(), ...others.map((o) => o.close())]);
  await server.stop();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
