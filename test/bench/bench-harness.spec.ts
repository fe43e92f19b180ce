import { Redis } from 'ioredis';
import { lockLibrary } from '../../bench/adapters/lock-libraries';
import { handedBackAfter } from '../../bench/adapters/queue-adapter';
import { warmUpAdapter } from '../../bench/children/adapter-warm-up';
import { runContended } from '../../bench/shapes/contended.child';
import { ParkedRole } from '../../bench/shapes/parked.child';
import type { Column } from '../../bench/support/bench-report';
import { monotonicMs } from '../../bench/support/monotonic-clock';
import { progressLine } from '../../bench/support/progress-line';
import { redisCommandCount } from '../../bench/support/redis-load-meter';
import {
  installRequestCounter,
  requestCount,
  uncountedClient,
} from '../../bench/support/request-counter';
import { withTimeout } from '../../bench/support/with-timeout';
import { startRedisServer, type RedisServer } from '../../scripts/redis-server';
import { waitFor } from '../support/helpers';

describe('bench shape timeout', () => {
  it('passes the result of work that finishes in time through', async () => {
    await expect(withTimeout(Promise.resolve(7), 1_000, 'serial run')).resolves.toBe(7);
  });

  it('rejects, naming the work, when it does not finish in time', async () => {
    const never = new Promise<never>(() => undefined);
    await expect(withTimeout(never, 20, 'handoff run')).rejects.toThrow(
      'handoff run did not finish within 20 ms',
    );
  });
});

describe('bench drain: stopping the consumer outside the timer', () => {
  it('hands the stop back, uncalled, once the last job was handled', async () => {
    const stop = jest.fn(async () => undefined);
    const handedBack = await handedBackAfter(Promise.resolve(), stop);
    expect(stop).not.toHaveBeenCalled();
    await handedBack();
    expect(stop).toHaveBeenCalledTimes(1);
  });

  it('stops the consumer itself and rethrows when the drain fails', async () => {
    const stop = jest.fn(async () => undefined);
    await expect(handedBackAfter(Promise.reject(new Error('stalled')), stop)).rejects.toThrow(
      'stalled',
    );
    expect(stop).toHaveBeenCalledTimes(1);
  });
});

describe('bench progress line', () => {
  const columns: Column[] = [
    { metric: 'pairsPerSec', header: 'pairs/s', digits: 0 },
    { metric: 'failures', header: 'failed acquires', digits: 0, sum: true },
    { metric: 'roundTrips', header: 'pair = N round trips', digits: 1, derived: true },
    { metric: 'gaveUpAfterMs', header: 'gave up after ms', digits: 0 },
  ];

  it('shows the measured columns of the report table that the metrics have', () => {
    expect(progressLine(columns, { pairsPerSec: 12345.6, failures: 0, roundTrips: 3 })).toBe(
      'pairs/s 12,346, failed acquires 0',
    );
  });
});

describe('bench parts on a redis-server of their own', () => {
  installRequestCounter();
  let server: RedisServer;
  let admin: Redis;

  beforeAll(async () => {
    // A server of its own: the tests count every connection and every command on it.
    server = await startRedisServer();
    admin = uncountedClient(new Redis(server.url));
  });

  afterAll(async () => {
    await admin.quit();
    await server.stop();
  });

  describe('bench child warm-up', () => {
    const clients = async () =>
      String(await admin.client('LIST'))
        .trim()
        .split('\n').length;

    it('opens what ours needs for waiting, so the first measured wait opens no connection', async () => {
      const adapter = await lockLibrary('ours').create(server.url);
      const holder = await lockLibrary('ours').create(server.url);
      try {
        await warmUpAdapter(adapter, holder, 'bench:test:lock:warm-up:0', 5);
        const before = await clients();
        const held = await holder.acquire('bench:test:lock');
        const sent = requestCount();
        const waiter = adapter.acquire('bench:test:lock');
        await waitFor('the waiter to try the held lock', () => requestCount() > sent);
        await holder.release(held);
        await adapter.release(await waiter);
        expect(await clients()).toBe(before);
      } finally {
        await adapter.close();
        await holder.close();
      }
    });

    it('works for a polling library and leaves its key free', async () => {
      const adapter = await lockLibrary('original').create(server.url);
      const holder = await lockLibrary('original').create(server.url);
      try {
        await warmUpAdapter(adapter, holder, 'bench:test:poll:warm-up:0', 3);
        expect(await admin.exists('bench:test:poll:warm-up:0')).toBe(0);
      } finally {
        await adapter.close();
        await holder.close();
      }
    });
  });

  describe('bench crowd and parked parts', () => {
    it('counts the commands scripts run inside Redis, and leaves INFO out', async () => {
      const before = await redisCommandCount(admin);
      await admin.eval(
        "redis.call('SET', KEYS[1], '1'); return redis.call('GET', KEYS[1])",
        1,
        'c',
      );
      await admin.info('cpu');
      expect((await redisCommandCount(admin)) - before).toBe(3);
    });

    it('runs concurrent callers per process, each counted, without overlaps', async () => {
      const adapter = await lockLibrary('ours').create(server.url);
      try {
        const report = await runContended(adapter, admin, {
          key: 'bench:test:crowd:lock',
          insideKey: 'bench:test:crowd:inside',
          counterKey: 'bench:test:crowd:counter',
          startAt: monotonicMs(),
          durationMs: 300,
          holdMs: 1,
          callers: 3,
        });
        expect(report.sectionsPerCaller).toHaveLength(3);
        expect(report.sectionsPerCaller.every((n) => n > 0)).toBe(true);
        expect(report.sections).toBe(report.sectionsPerCaller.reduce((a, b) => a + b, 0));
        expect(report.overlaps).toBe(0);
        expect(Number(await admin.get('bench:test:crowd:counter'))).toBe(report.sections);
      } finally {
        await adapter.close();
      }
    });

    it('the fair floor: four contenders on one key take turns, one at a time', async () => {
      // One caller per adapter, as one per process in the contended shape.
      const adapters = await Promise.all(
        [1, 2, 3, 4].map(() => lockLibrary('fair-floor').create(server.url)),
      );
      try {
        const params = {
          key: 'bench:test:floor:lock',
          insideKey: 'bench:test:floor:inside',
          counterKey: 'bench:test:floor:counter',
          startAt: monotonicMs() + 50,
          durationMs: 300,
          holdMs: 1,
          callers: 1,
        };
        const reports = await Promise.all(adapters.map((a) => runContended(a, admin, params)));
        const sections = reports.map((r) => r.sections);
        expect(reports.every((r) => r.overlaps === 0)).toBe(true);
        expect(Number(await admin.get(params.counterKey))).toBe(sections.reduce((a, b) => a + b));
        // Turns in arrival order: nobody gets more than one section beyond anybody else.
        expect(Math.max(...sections) - Math.min(...sections)).toBeLessThanOrEqual(1);
      } finally {
        await Promise.all(adapters.map((a) => a.close()));
      }
    });

    it('parks waiters on a held key; every one gets it once after the release', async () => {
      const holder = await lockLibrary('ours').create(server.url);
      const adapter = await lockLibrary('ours').create(server.url);
      try {
        const key = 'bench:test:parked:lock';
        const held = await holder.acquire(key);
        const role = new ParkedRole(adapter);
        const sent = requestCount();
        role.start({ key, waiters: 20, waitMs: 30_000 });
        await waitFor('the waiters to try the held lock', () => requestCount() > sent);
        const releasedAt = monotonicMs();
        await holder.release(held);
        const report = await role.finish({ deadline: monotonicMs() + 20_000 });
        expect(report).toMatchObject({ acquired: 20, gaveUp: 0, unfinished: 0 });
        expect(report.lastAcquiredAt).toBeGreaterThan(releasedAt);
      } finally {
        await Promise.all([adapter.close(), holder.close()]);
      }
    });

    it('counts the waiters still waiting at the deadline as unfinished', async () => {
      const holder = await lockLibrary('ours').create(server.url);
      const adapter = await lockLibrary('ours').create(server.url);
      try {
        const key = 'bench:test:parked-cut:lock';
        const held = await holder.acquire(key);
        const role = new ParkedRole(adapter);
        // A short wait, so that no waiter outlives the test by much.
        role.start({ key, waiters: 5, waitMs: 2_000 });
        const report = await role.finish({ deadline: monotonicMs() + 50 });
        expect(report).toMatchObject({
          acquired: 0,
          gaveUp: 0,
          unfinished: 5,
          lastAcquiredAt: null,
        });
        await holder.release(held);
        // In line behind the waiters: once the holder has it again, they had their turn.
        await holder.release(await holder.acquire(key));
      } finally {
        await Promise.all([adapter.close(), holder.close()]);
      }
    });
  });
});
