import 'reflect-metadata';
import type { Browser, Page } from 'playwright-core';
import request from 'supertest';
import { WaitingRoomService } from '../../lib';
import { chromiumPath, launchChromium } from '../support/chromium';
import { redisClient, uniquePrefix } from '../support/helpers';
import { admissionTimes } from '../waiting-room/support';
import type { PostgresServer } from '../../scripts/postgres-server';
import { createDatabase, HAVE_POSTGRES, startTestPostgres } from './support/postgres';
import { startSample, type RunningSample } from './support/sample-app';

const executablePath = chromiumPath();
if (!executablePath) {
  console.warn(
    'SKIPPED: the waiting room page test needs Chromium, which could not be found or installed ' +
      '(scripts/ensure-chromium.sh; set CHROMIUM_BIN to use another binary)',
  );
}
const suite = executablePath && HAVE_POSTGRES ? describe : describe.skip;

/** Generous: a loaded 2-core machine runs browsers and Nest apps at once. */
const UI_MS = 30_000;

suite("sample: the waiting room's page in Chromium", () => {
  const keyPrefix = uniquePrefix('sample-room');
  const redis = redisClient();
  let browser: Browser;
  let a: RunningSample;
  let b: RunningSample;
  let postgres: PostgresServer;

  beforeAll(async () => {
    [browser, postgres] = await Promise.all([launchChromium(executablePath!), startTestPostgres()]);
    const databaseUrl = await createDatabase(postgres, 'waiting_room');
    // Two instances of the sample on one Redis: pages on either share one line.
    [a, b] = await Promise.all([
      startSample({ keyPrefix, databaseUrl }),
      startSample({ keyPrefix, databaseUrl }),
    ]);
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await Promise.all([a?.app.close(), b?.app.close()]);
    await postgres?.destroy();
    redis.disconnect();
  });

  async function openPage(base: string, userId: string): Promise<Page> {
    const page = await browser.newPage();
    page.setDefaultTimeout(UI_MS);
    const response = await page.goto(`${base}/flash-sales/tv/wait?userId=${userId}`);
    expect(response?.status()).toBe(200);
    return page;
  }

  it('shows "you are number N" live over server-sent events, then the buy form in join order; buy needs the pass (403) and is rate limited per user (429)', async () => {
    await request(a.url)
      .post('/flash-sales')
      .send({
        sku: 'tv',
        stock: 10,
        price: 5,
        waitingRoom: { admitPerSecond: 0, passTtlMs: 60_000 },
      })
      .expect(201);
    // No pass yet: 403 naming the room.
    const refused = await request(b.url).post('/flash-sales/tv/buy').send({ userId: 'ann' });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ statusCode: 403, error: 'Forbidden', room: 'sale:tv' });

    // Three buyers, in this order, on two instances: the room holds, each sees its number.
    const users = ['ann', 'bob', 'cid'];
    const pages: Page[] = [];
    for (const [i, user] of users.entries()) {
      const page = await openPage(i % 2 ? b.url : a.url, user);
      await page
        .locator('#place', { hasText: `You are number ${i + 1} (the sale has not started)` })
        .waitFor();
      pages.push(page);
    }
    expect(await pages[2].locator('#buy').isHidden()).toBe(true);
    // A reload keeps the place.
    await pages[1].reload();
    await pages[1].locator('#place', { hasText: 'You are number 2 ' }).waitFor();

    // The sale starts, one buyer a second: each page turns into the buy form, in join order.
    await request(b.url)
      .put('/flash-sales/tv/waiting-room')
      .send({ admitPerSecond: 1, passTtlMs: 60_000 })
      .expect(204);
    for (const page of pages) {
      await page.locator('#buy').waitFor({ state: 'visible' });
      await page.locator('#place', { hasText: "It's your turn" }).waitFor();
    }
    const shownAt = await Promise.all(
      pages.map(async (p) => Number(await p.locator('#buy').getAttribute('data-shown-at'))),
    );
    const admitted = await admissionTimes(redis, keyPrefix, 'sale:tv', users, 60_000);
    for (let i = 1; i < users.length; i++) {
      expect(admitted[i]!).toBeGreaterThan(admitted[i - 1]!);
      expect(shownAt[i]).toBeGreaterThan(shownAt[i - 1]);
    }
    // The form buys with the pass.
    await pages[0].locator('#buy button').click();
    await pages[0].locator('#order', { hasText: 'tv-1: pending' }).waitFor();
    // 5 presses per 10 s per buyer and sale (ann pressed twice: the 403, the form): the sixth
    // gets 429.
    const presses = [];
    for (let i = 0; i < 4; i++) {
      presses.push(
        (await request(a.url).post('/flash-sales/tv/buy').send({ userId: 'ann' })).status,
      );
    }
    expect(presses).toEqual([409, 409, 409, 429]);
    await Promise.all(pages.map((p) => p.close()));
    expect(a.app.get(WaitingRoomService).localWaiters('sale:tv')).toBe(0);
  }, 120_000);
});
