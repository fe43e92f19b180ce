import 'reflect-metadata';
import { Agent, get } from 'node:http';
import type { ChildProcess } from 'node:child_process';
import type { INestApplicationContext } from '@nestjs/common';
import { QueueService } from '../../lib';
import type { SaleStatus } from '../../sample/flash-sale/flash-sale.dto';
import { ORDERS_QUEUE } from '../../sample/flash-sale/flash-sale-keys';
import { exited, lineFrom, spawnTs } from '../support/child';
import { createLockApp, testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';
import { buyAll, countBy, followOrders } from './support/buyers';
import { sendJson } from './support/sample-app';

/** One server-sent event: its `event:` type and parsed `data:`. */
interface ServerEvent {
  type: string;
  data: Record<string, unknown>;
}

/** Opens `url` as an event stream and collects its events until `close()`. */
function listen(url: string): Promise<{ events: ServerEvent[]; close: () => void }> {
  return new Promise((resolve, reject) => {
    const events: ServerEvent[] = [];
    const req = get(url, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`events answered ${res.statusCode}`));
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        const blocks = buffer.split('\n\n');
        buffer = blocks.pop() ?? '';
        for (const block of blocks) {
          const type = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (type && data) events.push({ type, data: JSON.parse(data) as ServerEvent['data'] });
        }
      });
      resolve({ events, close: () => req.destroy() });
    });
    req.on('error', () => undefined);
  });
}

describe('sample: flash sale on the embedded PostgreSQL (pglite), one instance', () => {
  let child: ChildProcess;
  let app: { url: string };
  /** The library on the same Redis and prefix, to pause the orders queue and change its bound. */
  let control: INestApplicationContext;
  let queues: QueueService;
  let agent: Agent;

  beforeAll(async () => {
    const keyPrefix = uniquePrefix('sample-embedded');
    // `npm run sample` as a newcomer runs it: no DATABASE_URL, so the embedded PostgreSQL (its
    // WebAssembly loads through dynamic imports, which Jest's sandbox can't run in-process). A
    // small orders queue bound, for the backpressure test.
    child = spawnTs('sample/main.ts', [], {
      REDIS_URL: testRedisUrl(),
      DATABASE_URL: '',
      KEY_PREFIX: keyPrefix,
      PORT: '0',
      ORDERS_MAX_SIZE: '40',
    });
    const line = await lineFrom(child, /sample listening on http:\/\/\S+,/, 90_000);
    child.stdout?.resume();
    child.stderr?.resume();
    app = { url: /(http:\/\/[^\s,]+),/.exec(line)![1] };
    control = await createLockApp({ keyPrefix });
    queues = control.get(QueueService);
    agent = new Agent({ keepAlive: true, maxSockets: 100 });
    // Bounds, not expectations: a child compiling the app on a loaded machine is slow.
  }, 120_000);

  afterAll(async () => {
    agent?.destroy();
    await control?.close();
    if (child && child.exitCode === null) {
      const done = exited(child);
      child.kill('SIGTERM');
      await done;
    }
  });

  async function statusOf(sku: string): Promise<SaleStatus> {
    return (await sendJson<SaleStatus>(agent, 'GET', `${app.url}/flash-sales/${sku}`)).body;
  }

  async function openSale(sku: string, stock: number): Promise<void> {
    const answer = await sendJson(agent, 'POST', `${app.url}/flash-sales`, {
      sku,
      stock,
      price: 5,
    });
    expect(answer.status).toBe(201);
  }

  it('sells exactly 400 units to 2,500 buyers; every accepted order reaches created, one row each', async () => {
    // The queue bound of this app is 40: lifted for this sale (null: the module's, unbounded).
    await queues.setMaxSize(ORDERS_QUEUE, null);
    try {
      await openSale('speaker', 400);
      const buyers = Array.from({ length: 2_500 }, (_, i) => `buyer-${i}`);
      const outcomes = await buyAll(agent, () => app.url, 'speaker', buyers);
      const statuses = countBy(outcomes.flatMap((o) => o.statuses));
      // 503: Redis slower than the command bound on a loaded machine, retried as its Retry-After
      // asks (the queue has no bound here); nothing else than these.
      expect(
        Object.keys(statuses).filter((s) => !['202', '410', '423', '503'].includes(s)),
      ).toEqual([]);
      const accepted = outcomes.filter((o) => o.orderId !== undefined);
      expect(accepted).toHaveLength(400);
      const views = await followOrders(
        agent,
        app.url,
        accepted.map((o) => o.orderId!),
      );
      expect(countBy(views.map((v) => v.state))).toEqual({ created: 400 });
      expect(new Set(views.map((v) => v.userId)).size).toBe(400);
      expect(await statusOf('speaker')).toEqual({
        sku: 'speaker',
        stock: 0,
        sold: 400,
        orders: 400,
        pending: 0,
      });
      const rows = (
        await sendJson<unknown[]>(agent, 'GET', `${app.url}/flash-sales/speaker/orders`)
      ).body;
      expect(rows).toHaveLength(400);
    } finally {
      await queues.setMaxSize(ORDERS_QUEUE, 40);
    }
  }, 90_000);

  it('answers 503 + Retry-After past the orders queue bound, puts the unit back in stock, and loses nothing', async () => {
    await openSale('blender', 100);
    await queues.pause(ORDERS_QUEUE);
    try {
      const buyers = Array.from({ length: 100 }, (_, i) => `buyer-${i}`);
      const answers = await Promise.all(
        buyers.map((userId) =>
          sendJson(agent, 'POST', `${app.url}/flash-sales/blender/buy`, { userId }),
        ),
      );
      const statuses = countBy(answers.map((a) => a.status));
      // Exactly the bound is accepted; the rest are told to come back.
      expect(statuses).toEqual({ 202: 40, 503: 60 });
      const full = answers.find((a) => a.status === 503)!;
      expect(full.headers['retry-after']).toBe('1');
      expect(full.body).toMatchObject({
        statusCode: 503,
        queue: expect.stringContaining(ORDERS_QUEUE) as string,
      });
      // The 60 refused units went back to the stock; nothing is written while paused.
      expect(await statusOf('blender')).toEqual({
        sku: 'blender',
        stock: 60,
        sold: 40,
        orders: 0,
        pending: 40,
      });
      const refused = buyers.filter((_, i) => answers[i].status === 503);
      const pending = await sendJson(
        agent,
        'GET',
        `${app.url}/orders/${answers[0].body.orderId ?? 'blender-1'}`,
      );
      expect(pending.body).toMatchObject({ state: 'pending' });
      await queues.resume(ORDERS_QUEUE);
      await waitFor(
        'the 40 orders to be written',
        async () => (await statusOf('blender')).orders === 40,
        20_000,
        20,
      );

      // The refused buyers come back and buy the units that were returned.
      const again = await buyAll(agent, () => app.url, 'blender', refused, 20);
      expect(again.filter((o) => o.orderId !== undefined)).toHaveLength(60);
      await waitFor(
        'every order to be written',
        async () => (await statusOf('blender')).pending === 0,
        20_000,
        20,
      );
      expect(await statusOf('blender')).toEqual({
        sku: 'blender',
        stock: 0,
        sold: 100,
        orders: 100,
        pending: 0,
      });
    } finally {
      await queues.resume(ORDERS_QUEUE);
    }
  });

  it('streams units sold and orders created as server-sent events', async () => {
    await openSale('radio', 3);
    const stream = await listen(`${app.url}/flash-sales/radio/events`);
    try {
      for (const userId of ['ann', 'bob', 'cy']) {
        const answer = await sendJson(agent, 'POST', `${app.url}/flash-sales/radio/buy`, {
          userId,
        });
        expect(answer.status).toBe(202);
      }
      await waitFor(
        'three created events',
        () => stream.events.filter((e) => e.type === 'created').length === 3,
        10_000,
        10,
      );
      expect(stream.events[0]).toEqual({
        type: 'status',
        data: { sku: 'radio', stock: 3, sold: 0, orders: 0, pending: 0 },
      });
      const ids = (type: string) =>
        stream.events
          .filter((e) => e.type === type)
          .map((e) => e.data.orderId as string)
          .sort();
      expect(ids('sold')).toEqual(['radio-1', 'radio-2', 'radio-3']);
      expect(ids('created')).toEqual(['radio-1', 'radio-2', 'radio-3']);
      // The sale's page shows the same stream in a browser.
      const page = await sendJson<string>(agent, 'GET', `${app.url}/flash-sales/radio/live`);
      expect(page.status).toBe(200);
      expect(page.headers['content-type']).toMatch(/^text\/html/);
      expect(page.body).toContain("new EventSource('/flash-sales/' + sku + '/events')");
    } finally {
      stream.close();
    }
  });

  it('answers bad input with 400 or 404 naming the field', async () => {
    await openSale('toaster', 2);
    const bought = await sendJson(agent, 'POST', `${app.url}/flash-sales/toaster/buy`, {
      userId: 'dee',
    });
    expect(bought.status).toBe(202);
    expect(bought.body).toEqual({ orderId: 'toaster-1', orderUrl: '/orders/toaster-1' });
    const cases: Array<
      [method: 'GET' | 'POST', path: string, body: unknown, status: number, field: string]
    > = [
      ['POST', '/flash-sales/toaster/buy', {}, 400, 'userId'],
      ['POST', '/flash-sales/no-such-sale/buy', { userId: 'dee' }, 404, 'sku'],
      ['GET', '/orders/not_an_order', undefined, 400, 'orderId'],
      ['GET', '/orders/toaster-0', undefined, 400, 'orderId'],
      ['GET', '/orders/toaster-1?waitMs=30001', undefined, 400, 'waitMs'],
      ['GET', '/orders/toaster-1?waitMs=-1', undefined, 400, 'waitMs'],
      ['GET', '/orders/toaster-1?waitMs=soon', undefined, 400, 'waitMs'],
      ['GET', '/orders/toaster-2', undefined, 404, 'orderId'],
      ['GET', '/flash-sales/no-such-sale/events', undefined, 404, 'sku'],
    ];
    for (const [method, path, body, status, field] of cases) {
      const answer = await sendJson(agent, method, `${app.url}${path}`, body);
      expect({ path, status: answer.status }).toEqual({ path, status });
      // A 400 names the bad field; a 404 names what was not found.
      if (status === 400) expect(answer.body).toMatchObject({ field });
      else expect(answer.body).toHaveProperty(field);
      expect(answer.body.message).toContain(status === 400 ? field : 'no ');
    }
    const view = await sendJson(agent, 'GET', `${app.url}/orders/toaster-1?waitMs=10000`);
    expect(view.body).toMatchObject({
      orderId: 'toaster-1',
      userId: 'dee',
      price: 5,
      state: 'created',
    });
  });
});
