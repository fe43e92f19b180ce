import 'reflect-metadata';
import { Agent } from 'node:http';
import { Logger } from '@nestjs/common';
import request from 'supertest';
import { LockService, QueueService } from '../../lib';
import type { PostgresServer } from '../../scripts/postgres-server';
import { SampleConfig } from '../../sample/config/sample-config';
import type {
  BuyAccepted,
  Order,
  OrderRow,
  OrderView,
  SaleStatus,
} from '../../sample/flash-sale/flash-sale.dto';
import { SaleChangedError } from '../../sample/flash-sale/flash-sale.errors';
import { SaleUnits } from '../../sample/flash-sale/sale-units';
import { SampleRedis } from '../../sample/redis/sample-redis';
import { testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';
import { startReplyCuttingProxy } from '../support/reply-cutting-proxy';
import { createDatabase, describeWithPostgres, startTestPostgres } from './support/postgres';
import { mapConcurrently, sendJson, startSample, type RunningSample } from './support/sample-app';

/** `saleHoldMs` of the instances: an unconfirmed unit goes back on sale this long after. */
const HOLD_MS = 3_000;

/** Answers a buyer may get besides 202: bought already, sold out, lock wait ran out. */
const REFUSALS = new Set([409, 410, 423]);

describeWithPostgres(
  'sample: flash sale on two app instances sharing one Redis and one PostgreSQL',
  () => {
    let postgres: PostgresServer;
    let a: RunningSample;
    let b: RunningSample;
    let agent: Agent;

    beforeAll(async () => {
      postgres = await startTestPostgres();
      const databaseUrl = await createDatabase(postgres, 'flash_sale');
      const keyPrefix = uniquePrefix('sample-flash');
      [a, b] = await Promise.all([
        startSample({ keyPrefix, databaseUrl, saleHoldMs: HOLD_MS }),
        startSample({ keyPrefix, databaseUrl, saleHoldMs: HOLD_MS }),
      ]);
      agent = new Agent({ keepAlive: true, maxSockets: 50 });
    });

    afterEach(() => jest.restoreAllMocks());

    afterAll(async () => {
      agent?.destroy();
      await Promise.all([a?.app.close(), b?.app.close()]);
      await postgres?.destroy();
    });

    async function createSale(sku: string, stock: number): Promise<void> {
      await request(a.url).post('/flash-sales').send({ sku, stock, price: 199 }).expect(201, {
        sku,
        stock,
        sold: 0,
        orders: 0,
        pending: 0,
      });
    }

    async function statusOf(app: RunningSample, sku: string): Promise<SaleStatus> {
      return (await request(app.url).get(`/flash-sales/${sku}`).expect(200)).body as SaleStatus;
    }

    /** Polls until the workers created every order of the units sold, then returns the status. */
    async function settledStatus(sku: string): Promise<SaleStatus> {
      await waitFor(
        `the orders of '${sku}' to be created`,
        // Each instance reuses its row count for up to 250 ms: both are asked.
        async () =>
          (await statusOf(a, sku)).pending === 0 && (await statusOf(b, sku)).pending === 0,
        15_000,
        20,
      );
      return statusOf(b, sku);
    }

    it('sells exactly 10 phones to 1,000 concurrent buyers spread over both instances, and the workers create 10 orders', async () => {
      await createSale('phone', 10);
      const buyers = Array.from({ length: 1_000 }, (_, i) => `buyer-${i}`);
      const answers = await mapConcurrently(buyers, 100, (userId, i) =>
        sendJson<BuyAccepted>(agent, 'POST', `${i % 2 ? b.url : a.url}/flash-sales/phone/buy`, {
          userId,
        }),
      );

      const bought = answers.filter((r) => r.status === 202);
      const boughtBy = buyers.filter((_, i) => answers[i].status === 202);
      const others = answers.filter((r) => r.status !== 202);
      expect(bought).toHaveLength(10);
      expect(others.filter((r) => !REFUSALS.has(r.status))).toEqual([]);
      expect(new Set(bought.map((r) => r.body.orderId))).toEqual(
        new Set(Array.from({ length: 10 }, (_, i) => `phone-${i + 1}`)),
      );

      expect(await settledStatus('phone')).toEqual({
        sku: 'phone',
        stock: 0,
        sold: 10,
        orders: 10,
        pending: 0,
      });
      expect(bought.map((r) => r.body.orderUrl).sort()).toEqual(
        bought.map((r) => `/orders/${r.body.orderId}`).sort(),
      );
      const orders = (await request(b.url).get('/flash-sales/phone/orders').expect(200))
        .body as OrderRow[];
      // Exactly the accepted purchases became rows: none oversold, none lost, none doubled; each
      // row carries the fence of the task lease that wrote it.
      expect(orders.map((o) => o.userId).sort()).toEqual(boughtBy.sort());
      for (const row of orders) expect(row.fence).toBeGreaterThan(0);
    });

    it('gives a user who presses buy 20 times at once, on both instances, exactly one order (and 429 past 5 presses in 10 s)', async () => {
      await createSale('tablet', 5);
      const answers = await mapConcurrently(Array.from({ length: 20 }), 20, (_, i) =>
        sendJson(agent, 'POST', `${i % 2 ? b.url : a.url}/flash-sales/tablet/buy`, {
          userId: 'alice',
        }),
      );
      const statuses = answers.map((r) => r.status);
      expect(statuses.filter((s) => s === 202)).toHaveLength(1);
      // The per-user rate limit (5 presses per 10 s and sale, across both instances) refuses 15
      // before they reach the stock lock; of the 5 admitted, the other 4 are refused with the order.
      expect(statuses.filter((s) => s === 429)).toHaveLength(15);
      expect(statuses.filter((s) => s !== 202 && s !== 409 && s !== 423 && s !== 429)).toEqual([]);
      const orderId = answers.find((r) => r.status === 202)!.body.orderId;
      for (const refused of answers.filter((r) => r.status === 409)) {
        expect(refused.body).toMatchObject({ userId: 'alice', orderId });
      }
      for (const limited of answers.filter((r) => r.status === 429)) {
        expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
        expect(limited.body).toMatchObject({ key: 'buy:tablet:alice' });
      }

      // Someone else still buys.
      await request(a.url).post('/flash-sales/tablet/buy').send({ userId: 'bob' }).expect(202);

      expect(await settledStatus('tablet')).toMatchObject({ stock: 3, sold: 2, orders: 2 });
      const orders = (await request(a.url).get('/flash-sales/tablet/orders').expect(200))
        .body as OrderRow[];
      expect(orders.map((o) => o.userId).sort()).toEqual(['alice', 'bob']);
    });

    it("repairs a sale whose order could not be enqueued: the buyer's retry enqueues it, and one order is created", async () => {
      await createSale('camera', 2);
      // The enqueue after the sale fails once on instance a, the way a Redis timeout fails it (the
      // test double stands in for the sample's QueueService; Redis itself is real).
      const enqueue = jest
        .spyOn(a.app.get(QueueService), 'enqueue')
        .mockRejectedValueOnce(new Error('Command timed out'));
      const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
      const failed = await request(a.url).post('/flash-sales/camera/buy').send({ userId: 'frank' });
      logged.mockRestore();
      // Redis trouble is a 503 with Retry-After, never a 500.
      expect(failed.status).toBe(503);
      expect(failed.headers['retry-after']).toBe('1');
      expect(enqueue).toHaveBeenCalledTimes(1);
      // The unit is sold to frank, but no order is on its way.
      expect(await statusOf(b, 'camera')).toEqual({
        sku: 'camera',
        stock: 1,
        sold: 1,
        orders: 0,
        pending: 1,
      });

      // Frank retries, on the other instance: refused as a buyer already, with his order, which
      // is enqueued again and created.
      const retry = await request(b.url).post('/flash-sales/camera/buy').send({ userId: 'frank' });
      expect(retry.status).toBe(409);
      expect(retry.body).toMatchObject({ error: 'Conflict', userId: 'frank', orderId: 'camera-1' });
      expect(await settledStatus('camera')).toMatchObject({ stock: 1, sold: 1, orders: 1 });
      const orders = (await request(a.url).get('/flash-sales/camera/orders').expect(200))
        .body as OrderRow[];
      expect(orders).toEqual([
        {
          orderId: 'camera-1',
          sku: 'camera',
          userId: 'frank',
          price: 199,
          fence: expect.any(Number) as number,
          boughtAt: expect.any(String) as string,
          createdAt: expect.any(String) as string,
        },
      ]);

      // Once the order exists, a retry enqueues nothing.
      const enqueueOnB = jest.spyOn(b.app.get(QueueService), 'enqueue');
      await request(b.url).post('/flash-sales/camera/buy').send({ userId: 'frank' }).expect(409);
      expect(enqueueOnB).not.toHaveBeenCalled();
      expect(await statusOf(a, 'camera')).toMatchObject({ sold: 1, orders: 1, pending: 0 });
    });

    it('puts the unit of a buyer answered 503 who never retries back on sale after the hold, tells them so, and a late enqueue of that order writes no row', async () => {
      await createSale('lens', 1);
      jest
        .spyOn(a.app.get(QueueService), 'enqueue')
        .mockRejectedValueOnce(new Error('Command timed out'));
      const failed = await request(a.url).post('/flash-sales/lens/buy').send({ userId: 'gina' });
      // The 503 names the order, so the buyer can follow it.
      expect(failed.status).toBe(503);
      expect(failed.headers['retry-after']).toBe('1');
      expect(failed.body).toMatchObject({
        error: 'Service Unavailable',
        orderId: 'lens-1',
        orderUrl: '/orders/lens-1',
        userId: 'gina',
      });
      // Gina never retries: within the hold (plus one sweep) the unit is back on sale.
      await waitFor(
        'the unit back on sale',
        async () => (await statusOf(b, 'lens')).stock === 1,
        HOLD_MS + 10_000,
        50,
      );
      expect(await statusOf(b, 'lens')).toEqual({
        sku: 'lens',
        stock: 1,
        sold: 0,
        orders: 0,
        pending: 0,
      });
      const released = await request(b.url).get('/orders/lens-1').expect(200);
      expect(released.body).toMatchObject({ orderId: 'lens-1', userId: 'gina', state: 'released' });

      // The order enqueued late anyway (say a retry read gina's record just before the release):
      // the worker runs it and writes no row, since the outcome 'released' was recorded first.
      const queues = b.app.get(QueueService);
      const { orderId, sku, userId, price, boughtAt } = released.body as Order;
      await queues.enqueue('orders', orderId, {
        payload: { orderId, sku, userId, price, boughtAt },
      });
      await queues.waitFor('orders', 'lens-1', { timeoutMs: 10_000 });
      expect(await statusOf(a, 'lens')).toMatchObject({ stock: 1, sold: 0, orders: 0 });
      await request(a.url).get('/flash-sales/lens/orders').expect(200, []);
      // The unit sells again, to someone else, under a new order id.
      const again = await request(b.url).post('/flash-sales/lens/buy').send({ userId: 'hal' });
      expect(again.status).toBe(202);
      expect(again.body).toMatchObject({ orderId: 'lens-2' });
      expect(await settledStatus('lens')).toMatchObject({ stock: 0, sold: 1, orders: 1 });
    }, 30_000);

    it("takes a unit once when ioredis sends the sale's write again after losing its reply (a failover), and refuses a write whose sale moved", async () => {
      await createSale('speaker', 3);
      // Instance c reaches Redis through a proxy that loses the reply to the sale's write and
      // closes the connection: Redis ran it, and ioredis sends it again on the new connection (as
      // after a master killed once its replica had the write: the promoted replica runs it twice).
      const proxy = await startReplyCuttingProxy(testRedisUrl());
      const c = await startSample({
        keyPrefix: a.app.get(SampleRedis).prefix,
        databaseUrl: a.app.get(SampleConfig).databaseUrl,
        saleHoldMs: HOLD_MS,
        redisUrl: proxy.url,
      });
      // The write's arguments: each unit's order id, then its buyer (RESP bulk strings).
      const write = 'speaker-1\r\n$3\r\nivy\r\n';
      try {
        proxy.cutAfter(write);
        const bought = await request(c.url)
          .post('/flash-sales/speaker/buy')
          .send({ userId: 'ivy' });
        expect(bought.status).toBe(202);
        expect(bought.body).toMatchObject({ orderId: 'speaker-1' });
        expect([proxy.cuts, proxy.seen(write)]).toEqual([1, 2]);
        // One unit taken, not two (a MULTI of HINCRBYs took two here and held one).
        expect(await statusOf(a, 'speaker')).toMatchObject({ stock: 2, sold: 1 });
        expect(await settledStatus('speaker')).toMatchObject({ stock: 2, sold: 1, orders: 1 });
      } finally {
        await c.app.close();
        await proxy.close();
      }

      // The same batch again takes nothing; a batch numbered from a seq the sale has left (its
      // stock lock was lost and another instance sold) is refused, nothing taken.
      const units = a.app.get(SaleUnits);
      const ivy = (await request(a.url).get('/orders/speaker-1').expect(200)).body as OrderView;
      const { orderId, sku, userId, price, boughtAt } = ivy;
      await units.take('speaker', 0, [{ orderId, sku, userId, price, boughtAt }]);
      const stale = { orderId: 'speaker-1', sku, userId: 'jo', price, boughtAt };
      await expect(units.take('speaker', 0, [stale])).rejects.toThrow(SaleChangedError);
      await expect(units.take('speaker', 0, [stale])).rejects.toThrow(
        "flash sale 'speaker' changed while a batch was sold (SALE_CHANGED the sale's seq is 1, not 0): nothing was taken",
      );
      expect(await statusOf(b, 'speaker')).toMatchObject({ stock: 2, sold: 1, orders: 1 });
    });

    it('answers 423 Locked with Retry-After when the stock lock stays taken past the 2 s wait', async () => {
      await createSale('watch', 3);
      // Another instance holds the stock lock (e.g. a slow purchase).
      const held = await a.app.get(LockService).acquire('stock:watch', { ttlMs: 10_000 });
      try {
        const answer = await request(b.url)
          .post('/flash-sales/watch/buy')
          .send({ userId: 'carol' });
        expect(answer.status).toBe(423);
        expect(Number(answer.headers['retry-after'])).toBeGreaterThanOrEqual(1);
        expect(answer.body).toMatchObject({ statusCode: 423, error: 'Locked', key: 'stock:watch' });
      } finally {
        await held.release();
      }
      await request(b.url).post('/flash-sales/watch/buy').send({ userId: 'carol' }).expect(202);
      expect(await settledStatus('watch')).toMatchObject({ stock: 2, sold: 1, orders: 1 });
    });

    it('answers 410 Gone once sold out, 404 for an unknown sale, 409 for a sale opened twice and 400 for bad input', async () => {
      await createSale('lamp', 1);
      await request(a.url).post('/flash-sales/lamp/buy').send({ userId: 'dan' }).expect(202);
      const gone = await request(b.url).post('/flash-sales/lamp/buy').send({ userId: 'erin' });
      expect(gone.status).toBe(410);
      expect(gone.body).toMatchObject({ error: 'Gone', sku: 'lamp', sold: 1 });
      expect(gone.body.message).toBe("flash sale 'lamp' is sold out: all 1 units are sold");

      const missing = await request(a.url).post('/flash-sales/nothing/buy').send({ userId: 'dan' });
      expect(missing.status).toBe(404);
      expect(missing.body.message).toBe("no flash sale 'nothing'");
      await request(a.url).get('/flash-sales/nothing').expect(404);

      const twice = await request(b.url)
        .post('/flash-sales')
        .send({ sku: 'lamp', stock: 5, price: 1 });
      expect(twice.status).toBe(409);
      expect(twice.body.message).toBe("flash sale 'lamp' exists already");

      const bad = [
        request(a.url).post('/flash-sales').send({ sku: 'x', stock: -1, price: 1 }),
        request(a.url).post('/flash-sales').send({ sku: 'x', stock: 1.5, price: 1 }),
        request(a.url).post('/flash-sales').send({ sku: 'has space', stock: 1, price: 1 }),
        request(a.url).post('/flash-sales').send({ sku: 'x', stock: 1, price: 1, extra: true }),
        request(a.url).post('/flash-sales').send([1, 2]),
        request(a.url).post('/flash-sales/lamp2/buy').send({ userId: 42 }),
        request(a.url).post('/flash-sales/lamp2/buy').send({}),
      ];
      const answers = await Promise.all(bad);
      expect(answers.map((r) => r.status)).toEqual([400, 400, 400, 400, 400, 400, 400]);
      expect(answers[0].body.message).toBe('stock must be an integer from 0 to 1000000, got -1');
      expect(answers[5].body).toMatchObject({ field: 'userId', error: 'Bad Request' });
      await request(a.url).get('/flash-sales/x').expect(404); // nothing was created
    });
  },
);
