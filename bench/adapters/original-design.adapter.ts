import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { sleep } from '../support/monotonic-clock';
import { BENCH_WAIT_MS, type HeldLock, type LockAdapter } from './lock-adapter';

/** The original design's default lock TTL (`expire = 15 s`). */
const EXPIRE_MS = 15_000;
/** The original design's retry interval (`waitInterval = 100 ms`). */
const POLL_MS = 100;

const COMPARE_AND_DELETE = readFileSync(
  join(__dirname, 'scripts', 'compare-and-delete.lua'),
  'utf8',
);

interface OriginalLock {
  key: string;
  token: string;
}

type ClientWithRelease = Redis & {
  compareAndDelete(key: string, token: string): Promise<number>;
};

/**
 * The algorithm this library replaces, written in a few lines: `SET key token NX PX 15000`,
 * retried every 100 ms until a 10 s timeout; release by a compare-and-delete script. No line, no
 * wake-up: a waiter learns that the lock is free on its next poll.
 */
export class OriginalDesignAdapter implements LockAdapter {
  private constructor(private readonly client: ClientWithRelease) {}

  /** @param url the bench Redis */
  static async create(url: string): Promise<OriginalDesignAdapter> {
    const client = new Redis(url);
    client.defineCommand('compareAndDelete', { numberOfKeys: 1, lua: COMPARE_AND_DELETE });
    await client.ping();
    return new OriginalDesignAdapter(client as ClientWithRelease);
  }

  async acquire(key: string, waitMs = BENCH_WAIT_MS): Promise<HeldLock> {
    const token = randomBytes(16).toString('hex');
    const deadline = Date.now() + waitMs;
    for (;;) {
      if ((await this.client.set(key, token, 'PX', EXPIRE_MS, 'NX')) === 'OK') {
        const lock: OriginalLock = { key, token };
        return lock;
      }
      if (Date.now() >= deadline) {
        throw new Error(`lock '${key}' not acquired within ${waitMs} ms`);
      }
      await sleep(POLL_MS);
    }
  }

  async release(lock: HeldLock): Promise<void> {
    const { key, token } = lock as OriginalLock;
    await this.client.compareAndDelete(key, token);
  }

  async close(): Promise<void> {
    await this.client.quit();
  }
}
