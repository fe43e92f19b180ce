import Redis from 'ioredis';
import type { LockAdapter, LockLibrary } from './lock-adapter';

/**
 * The waiter's script: takes the free lock, or joins the list of waiters (its id at the end).
 * The release's: pops the next waiter, makes it the holder and publishes to its own channel.
 */
const FLOOR_JOIN =
  "if redis.call('SET', KEYS[1], ARGV[1], 'NX') then return 1 end " +
  "redis.call('RPUSH', KEYS[2], ARGV[1]) return 0";
const FLOOR_RELEASE =
  "local next = redis.call('LPOP', KEYS[2]) " +
  "if not next then redis.call('DEL', KEYS[1]) return 0 end " +
  "redis.call('SET', KEYS[1], next) redis.call('PUBLISH', KEYS[1] .. ':' .. next, '1') return 1";

/**
 * One caller per adapter (one handoff resolver per key): each contended process has its own.
 */
async function createFairFloor(url: string): Promise<LockAdapter> {
  const client = new Redis(url);
  const sub = new Redis(url);
  const me = Math.random().toString(36).slice(2);
  const waiting = new Map<string, () => void>();
  sub.on('message', (channel: string) => waiting.get(channel)?.());
  return {
    async acquire(key: string) {
      const channel = `${key}:${me}`;
      if (!waiting.has(channel)) await sub.subscribe(channel);
      const handed = new Promise<void>((resolve) => waiting.set(channel, resolve));
      const got = await client.eval(FLOOR_JOIN, 2, key, `${key}:line`, me);
      if (got !== 1) await handed;
      waiting.set(channel, () => undefined);
      return key;
    },
    async release(key: unknown) {
      await client.eval(FLOOR_RELEASE, 2, key as string, `${key as string}:line`);
    },
    async close() {
      client.disconnect();
      sub.disconnect();
    },
  };
}

/**
 * `fair-floor`: the least a fair lock with direct handoff does, for comparison, not a lock to use
 * (no TTL of the holder or of a waiter's place, no fence, no recovery from a crash, one caller per
 * process). A waiter's one script takes the free lock or joins a list; the release's one script
 * pops the next waiter, makes it the holder and publishes to that waiter's own channel, on which
 * it waits: two requests and one delivery a section, as ours, with 2 + 3 commands inside. A row of
 * the contended table only (`CONTENDED_LIBRARIES`); no target compares with it.
 */
export const FAIR_FLOOR: LockLibrary = {
  id: 'fair-floor',
  label: 'fair floor (a reference, not a lock: no TTL, fence or recovery)',
  ours: false,
  create: createFairFloor,
};
