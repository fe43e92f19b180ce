import 'reflect-metadata';
import { once } from 'node:events';
import { hostname } from 'node:os';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { QueueService } from '../../lib';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { exited, lineFrom, spawnTs } from '../support/child';
import {
  createLockApp,
  deferred,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';

describe('QueueService.workers: the workers of every instance', () => {
  const prefix = uniquePrefix('queue-workers');
  const QUEUE = 'registry';
  let app: INestApplicationContext;
  let queues: QueueService;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix, instanceId: 'parent' });
    queues = app.get(QueueService);
  });
  afterAll(async () => {
    await app.close();
  });

  it('lists the workers of two app instances with their concurrency and running tasks; a killed instance drops out, a closed worker at once', async () => {
    const started = deferred();
    const release = deferred();
    const local = queues.process(
      QUEUE,
      async () => {
        started.resolve();
        await release.promise;
      },
      { concurrency: 3 },
    );
    // This instance's worker runs one task until released (before the child starts).
    await queues.enqueue(QUEUE, 'hold');
    await started.promise;
    expect(queues.localWorkers(QUEUE)).toEqual([local]);
    const child = spawnTs('test/fixtures/queue-worker-child.ts', [], {
      REDIS_URL: testRedisUrl(),
      PREFIX: prefix,
      QUEUE,
      CONCURRENCY: '7',
      MODULE_OPTIONS_JSON: JSON.stringify({ instanceId: 'child-a' }),
    });
    const childPid = Number((await lineFrom(child, /^ready \d+$/, 60_000)).split(' ')[1]);

    // `running` is as of each entry's last heartbeat (every 5 s): the parent's first entry was
    // written when its worker started, before the task did.
    await waitFor(
      'both instances listed, the parent running its task',
      async () => {
        const listed = await queues.workers(QUEUE);
        return (
          listed.length === 2 && listed.some((w) => w.instance === 'parent' && w.running === 1)
        );
      },
      15_000,
    );
    const workers = await queues.workers(QUEUE);
    expect(workers.map((w) => [w.instance, w.concurrency, w.pid, w.running])).toEqual([
      ['parent', 3, process.pid, 1],
      ['child-a', 7, childPid, 0],
    ]);
    for (const w of workers) {
      expect(w).toMatchObject({ host: hostname(), names: [] });
      expect(w.since).toBeLessThanOrEqual(Date.now());
      expect(typeof w.heartbeatAt).toBe('number');
    }

    // A new concurrency shows with the next heartbeat (every 5 s).
    local.setConcurrency(4);
    await waitFor(
      'the new concurrency in the registry',
      async () =>
        (await queues.workers(QUEUE)).find((w) => w.instance === 'parent')?.concurrency === 4,
      12_000,
      100,
    );
    release.resolve();

    // SIGKILL: no goodbye; its entry ages out after 15 s without a heartbeat.
    child.kill('SIGKILL');
    await exited(child);
    await waitFor(
      'the killed instance to drop out',
      async () => (await queues.workers(QUEUE)).every((w) => w.instance !== 'child-a'),
      25_000,
      200,
    );
    expect((await queues.workers(QUEUE)).map((w) => w.instance)).toEqual(['parent']);

    // A worker that closes leaves at once.
    await local.close();
    expect(await queues.workers(QUEUE)).toEqual([]);
    expect(queues.localWorkers(QUEUE)).toEqual([]);
  }, 120_000);

  it('keeps apart two modules of one instanceId (two apps in a process, or containers of one host name and pid)', async () => {
    const q = 'same-instance';
    const twin = await createLockApp({ keyPrefix: prefix, instanceId: 'parent' });
    try {
      const welcome = queues.process(q, async () => undefined, { name: 'welcome' });
      const digest = twin.get(QueueService).process(q, async () => undefined, { name: 'digest' });
      const names = async () => (await queues.workers(q)).map((w) => w.names.join()).sort();
      await waitFor('both entries', async () => (await names()).length === 2, 5_000);
      expect(await names()).toEqual(['digest', 'welcome']);
      // One closing drops its own entry, not the other's.
      await digest.close();
      expect(await names()).toEqual(['welcome']);
      await welcome.close();
    } finally {
      await twin.close();
    }
  });

  it('drops the entry of a named loop whose last handler closed at once, while the loop drains: never listed with no names ("runs every task")', async () => {
    const q = 'last-name';
    const started = deferred();
    const release = deferred();
    const a = queues.process(
      q,
      async () => {
        started.resolve();
        await release.promise;
      },
      { name: 'a' },
    );
    await queues.enqueue(q, 'a1', { name: 'a' });
    await started.promise;
    expect((await queues.workers(q)).map((w) => w.names)).toEqual([['a']]);
    // The handler runs on: the loop drains up to drainTimeoutMs.
    const closing = a.close();
    await waitFor('the entry dropped', async () => (await queues.workers(q)).length === 0);
    release.resolve();
    await closing;
    expect(await queues.workers(q)).toEqual([]);
  });

  it("writes a named handler added to a running loop at once: another module leaves the new name's tasks to it, even from a read of the registry made before (none buried as unknown)", async () => {
    const q = 'added-name';
    const twin = await createLockApp({ keyPrefix: prefix, instanceId: 'twin' });
    const other = twin.get(QueueService);
    const gates = { b: deferred(), c: deferred() };
    const ran: string[] = [];
    const held = (gate: Promise<void>) => async (task: { id: string }) => {
      ran.push(task.id);
      await gate;
    };
    const a = queues.process(q, async () => undefined, { name: 'a' });
    const b = other.process(q, held(gates.b.promise), { name: 'b' });
    let c: { close(): Promise<void> } | undefined;
    const state = async (id: string) => (await queues.get(q, id))?.state;
    try {
      // The twin's loop (one slot: b's) is full, so only this module claims 'b2': it reads the
      // registry (the twin runs 'b'), passes 'b2' on, and keeps that read for a second.
      await other.enqueue(q, 'b1', { name: 'b' });
      await waitFor('b1 running', () => ran.includes('b1'));
      await other.enqueue(q, 'b2', { name: 'b' });
      await waitFor('b2 passed on', async () => (await state('b2')) === 'delayed');
      // 'c' joins the twin's running loop (one more slot): the twin takes one 'c' task and
      // holds it, so this module claims the other and asks the registry about 'c'.
      c = other.process(q, held(gates.c.promise), { name: 'c' });
      const names = (await other.workers(q)).map((w) => `${w.instance}:${w.names.join()}`);
      expect(names.sort()).toEqual(['parent:a', 'twin:b,c']);
      await other.enqueue(q, 'c1', { name: 'c' });
      await other.enqueue(q, 'c2', { name: 'c' });
      await waitFor('one c running in the twin', () => ran.some((id) => id.startsWith('c')));
      const claimedHere = ran.includes('c1') ? 'c2' : 'c1';
      await waitFor(`${claimedHere} handled here`, async () =>
        ['delayed', 'dead'].includes((await state(claimedHere)) ?? ''),
      );
      expect(await queues.get(q, claimedHere)).toMatchObject({ state: 'delayed', attempts: 0 });
      expect((await queues.stats(q)).dead).toBe(0);
    } finally {
      gates.b.resolve();
      gates.c.resolve();
      await Promise.all([a.close(), b.close(), c?.close()]);
      await twin.close();
    }
  });

  /**
   * On queue `q`, two modules started now (their next heartbeat 5 s away): 'a-side' runs handler
   * 'a' only (on `client`, if given), 'b-side' runs 'b' with one slot, held by 'b1' until the
   * gate opens. Then the registry's entries are lost (`lose`: the hash deleted, as a restart
   * without persistence or a flush does) and 'b2' is enqueued: only 'a-side' has a free slot.
   * Expects 'b2' left to 'b-side' (given back unattempted, none dead; 'a-side' wrote its entry
   * again), then run there.
   */
  async function expectPassedOnAfterLoss(
    q: string,
    lose: (workersKey: string, aSide: QueueService) => Promise<void>,
    client?: Redis,
  ): Promise<void> {
    const aApp = await createLockApp({
      keyPrefix: prefix,
      instanceId: 'a-side',
      ...(client ? { redis: client } : {}),
    });
    const bApp = await createLockApp({ keyPrefix: prefix, instanceId: 'b-side' });
    const gate = deferred();
    const ran: string[] = [];
    const b = bApp.get(QueueService).process(
      q,
      async (task) => {
        ran.push(`b:${task.id}`);
        if (task.id === 'b1') await gate.promise;
      },
      { name: 'b' },
    );
    let a: { close(): Promise<void> } | undefined;
    try {
      await queues.enqueue(q, 'b1', { name: 'b' });
      await waitFor('b1 running', () => ran.includes('b:b1'));
      // Started after: a-side would pass b1 on (b-side runs 'b'), a second's delay.
      const aSide = aApp.get(QueueService);
      a = aSide.process(q, (task) => void ran.push(`a:${task.id}`), { name: 'a' });
      // Read on a-side's connection: the reply to a-side's first heartbeat came before.
      await waitFor('both entries', async () => (await aSide.workers(q)).length === 2);
      await lose(queueRedisKeys(prefix, q).workers, aSide);
      await queues.enqueue(q, 'b2', { name: 'b' });
      await waitFor('b2 handled by a-side', async () =>
        ['delayed', 'dead'].includes((await queues.get(q, 'b2'))?.state ?? ''),
      );
      expect(await queues.get(q, 'b2')).toMatchObject({ state: 'delayed', attempts: 0 });
      expect((await queues.stats(q)).dead).toBe(0);
      // a-side's entry was written again at once, not at its next heartbeat.
      expect((await queues.workers(q)).map((w) => w.instance)).toContain('a-side');
      gate.resolve();
      await waitFor('b2 ran in b-side', () => ran.includes('b:b2'));
      expect(ran).toEqual(['b:b1', 'b:b2']);
      expect(await queues.get(q, 'b2')).toMatchObject({ state: 'completed', attempts: 1 });
    } finally {
      gate.resolve();
      await Promise.all([a?.close(), b.close()]);
      await Promise.all([aApp.close(), bApp.close()]);
    }
  }

  it("after the registry's entries were lost (a flush) leaves a name's tasks to its live handler, not buried: a read without this loop's own entry is not trusted, and the entries are written again at once", async () => {
    const q = 'lost-entries';
    const redis = redisClient();
    try {
      await expectPassedOnAfterLoss(q, async (key) => {
        await redis.del(key);
        expect(await queues.workers(q)).toEqual([]);
      });
    } finally {
      redis.disconnect();
    }
  });

  it("a heartbeat that had to create this instance's entry again shows the entries lost: no task of another instance's name is buried until that one wrote its entry again", async () => {
    const q = 'recreated';
    const redis = redisClient();
    try {
      await expectPassedOnAfterLoss(q, async (key, aSide) => {
        await redis.del(key);
        // A handler added to a-side's running loop writes its entry at once (a heartbeat), before
        // a-side reads the registry: that read has a-side's entry and not b-side's.
        aSide.process(q, () => undefined, { name: 'c' });
        await waitFor('a-side written again', async () => (await queues.workers(q)).length === 1);
        expect((await queues.workers(q)).map((w) => `${w.instance}:${w.names.join()}`)).toEqual([
          'a-side:a,c',
        ]);
      });
    } finally {
      redis.disconnect();
    }
  });

  it("writes the entries again when the connection comes back (a Redis restart that lost them), and buries no task of another instance's name until that one wrote its entry again", async () => {
    const q = 'reconnected';
    const redis = redisClient();
    const client = new Redis(testRedisUrl());
    client.on('error', () => undefined);
    try {
      await expectPassedOnAfterLoss(
        q,
        async (key) => {
          await redis.del(key);
          const back = once(client, 'ready');
          client.disconnect(true);
          await back;
          await client.ping();
          // a-side's entry is back at once; b-side's comes with its heartbeat, 5 s away.
          expect((await queues.workers(q)).map((w) => `${w.instance}:${w.names.join()}`)).toEqual([
            'a-side:a',
          ]);
        },
        client,
      );
    } finally {
      redis.disconnect();
      client.disconnect();
    }
  });
});
