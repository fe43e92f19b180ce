/**
 * Entry point of the semaphore shape's child processes (forked per library and round by
 * `semaphoreShape`): sets up one semaphore library, then on request runs the contended loop
 * (`runContended` with the semaphore's limit as capacity) or parks waiters.
 * Messages in: `{ op, args }`; out: `{ op, ok, result | error }`.
 */
import 'reflect-metadata';
import { Redis } from 'ioredis';
import type { LockAdapter } from '../adapters/lock-adapter';
import { semaphoreLibrary } from '../adapters/semaphore-libraries';
import { installRequestCounter, requestCount, uncountedClient } from '../support/request-counter';
import { runContended, type ContendedParams } from './contended.child';

installRequestCounter();

let adapter: LockAdapter | undefined;
let marker: Redis | undefined;
let parked: Promise<void> | undefined;

const operations: Record<string, (args: any) => unknown> = {
  async setup({ library, url, key, warmupPairs }) {
    adapter = await semaphoreLibrary(library).create(url);
    marker = uncountedClient(new Redis(url));
    await marker.ping();
    for (let i = 0; i < warmupPairs; i++)
      await adapter.release(await adapter.acquire(`${key}:warm-up`));
  },
  contended: (params: ContendedParams) => runContended(adapter!, marker!, params),
  /** Starts `count` acquisitions of `key` that wait (its permits are held elsewhere). */
  park({ key, count }: { key: string; count: number }) {
    const a = adapter!;
    parked = Promise.all(
      Array.from({ length: count }, async () => a.release(await a.acquire(key))),
    ).then(() => undefined);
  },
  /** Requests this process's library sent so far. */
  requests: () => requestCount(),
  /** Resolves once every parked acquisition got its permit (and released it). */
  drained: () => parked,
  async teardown() {
    await Promise.allSettled([adapter?.close(), marker?.quit()]);
  },
};

process.on('message', async ({ op, args }: { op: string; args?: unknown }) => {
  try {
    const result = await operations[op](args);
    process.send?.({ op, ok: true, result: result ?? null });
  } catch (err) {
    process.send?.({ op, ok: false, error: (err as Error).stack ?? String(err) });
  }
});

process.send?.({ op: 'started', ok: true, result: null });
