import { Redis } from 'ioredis';
import { lockLibrary } from '../../bench/adapters/lock-libraries';
import { handedBackAfter } from '../../bench/adapters/queue-adapter';
import { warmUpAdapter } from '../../bench/children/adapter-warm-up';
import type { Column } from '../../bench/support/bench-report';
import { progressLine } from '../../bench/support/progress-line';
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

describe('bench child warm-up', () => {
  installRequestCounter();
  let server: RedisServer;
  let admin: Redis;

  beforeAll(async () => {
    // A server of its own: the test counts every connection on it.
    server = await startRedisServer();
    admin = uncountedClient(new Redis(server.url));
  });

  afterAll(async () => {
    await admin.quit();
    await server.stop();
  });

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
