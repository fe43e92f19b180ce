/**
 * A visitor's admission -> the sample's waiting room page showing the buy form, over server-sent
 * events, in headless Chromium: one instance of the sample (embedded database) on a private
 * redis-server; per round, a sale with a held waiting room, `--pages` pages (one buyer each) that
 * show "you are number N", then the room opens at `--rate` a second. For each page: the time the
 * page showed the form (`Date.now()` in the page, `data-shown-at`) minus the time Redis admitted
 * its buyer (its pass's expiry minus `passTtlMs`); same host, so one clock. Median, p99 and max
 * over every page of every round.
 *
 *   node -r ts-node/register/transpile-only bench/waiting-room-page.ts [--rounds 3] [--pages 30]
 *     [--rate 5]
 */
import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import Redis from 'ioredis';
import { waitingRoomKeys } from '../lib/waiting-room/waiting-room-store';
import { createSampleApp } from '../sample/sample-app';
import { startRedisServer } from '../scripts/redis-server';
import { chromiumPath, launchChromium } from '../test/support/chromium';
import { median, percentile } from './support/bench-stats';
import { numberArg } from './support/script-args';

const ROUNDS = numberArg('rounds', 3);
const PAGES = numberArg('pages', 30);
const RATE = numberArg('rate', 5);
const PASS_TTL_MS = 600_000;
const PREFIX = 'bench-page:';

async function send(base: string, method: string, path: string, body: unknown): Promise<void> {
  const res = await fetch(base + path, {
    method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
}

async function main(): Promise<void> {
  console.log(
    `load average at start: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  const executablePath = chromiumPath();
  if (!executablePath) throw new Error('no Chromium (scripts/ensure-chromium.sh)');
  const server = await startRedisServer();
  const probe = new Redis(server.url);
  const app = await createSampleApp(
    { redisUrl: server.url, keyPrefix: PREFIX },
    { logger: ['error'] },
  );
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  const browser = await launchChromium(executablePath);
  const latencies: number[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const sku = `tv${round}`;
      await send(base, 'POST', '/flash-sales', {
        sku,
        stock: PAGES,
        price: 1,
        waitingRoom: { admitPerSecond: 0, passTtlMs: PASS_TTL_MS },
      });
      const users = Array.from({ length: PAGES }, (_, i) => `buyer-${round}-${i}`);
      // A context per page: a browser keeps at most 6 connections per host and context, and
      // each page holds one open for its events.
      const contexts = await Promise.all(users.map(() => browser.newContext()));
      const pages = await Promise.all(
        users.map(async (user, i) => {
          const page = await contexts[i].newPage();
          page.setDefaultTimeout(120_000);
          await page.goto(`${base}/flash-sales/${sku}/wait?userId=${user}`);
          await page.locator('#place', { hasText: 'You are number' }).waitFor();
          return page;
        }),
      );
      await send(base, 'PUT', `/flash-sales/${sku}/waiting-room`, {
        admitPerSecond: RATE,
        passTtlMs: PASS_TTL_MS,
      });
      const shownAt = await Promise.all(
        pages.map(async (page) => {
          const form = page.locator('#buy');
          await form.waitFor({ state: 'visible' });
          return Number(await form.getAttribute('data-shown-at'));
        }),
      );
      const passes = waitingRoomKeys(PREFIX, `sale:${sku}`)[3];
      const scores = await probe.zmscore(passes, ...users);
      scores.forEach((score, i) => latencies.push(shownAt[i] - (Number(score) - PASS_TTL_MS)));
      await Promise.all(contexts.map((c) => c.close()));
      console.log(`round ${round + 1}: ${PAGES} pages admitted at ${RATE}/s`);
    }
    console.log(
      `admission -> buy form shown (${latencies.length} pages): median ${median(latencies)} ms, ` +
        `p99 ${percentile(latencies, 99)} ms, max ${Math.max(...latencies)} ms`,
    );
    console.log(
      `load average at end: ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
  } finally {
    await browser.close();
    await app.close();
    probe.disconnect();
    await server.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
