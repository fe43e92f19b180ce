import { Redis } from 'ioredis';
import type { RedisNode } from './nodes';

// When could another holder first be granted a lost lock? When the key with the holder's token
// expired in Redis: read by the test process (never partitioned) with PEXPIRETIME (Redis 7,
// epoch ms by the machine's real-time clock), polled while the holder is cut off, so that an
// extension that still got through is seen too.

const READ = `
local token = redis.call('GET', KEYS[1])
if token == false then return {false, -2} end
return {token, redis.call('PEXPIRETIME', KEYS[1])}`;

/** Polls the expiry of `redisKey` while it holds `token` on each node; `stop` resolves it. */
export function watchExpiry(
  nodes: readonly RedisNode[],
  redisKey: string,
  token: string,
): { stop(): Promise<Array<number | undefined>> } {
  const clients = nodes.map(
    (n) =>
      new Redis({
        host: n.host,
        port: n.port,
        maxRetriesPerRequest: 0,
        commandTimeout: 1_000,
        retryStrategy: () => 100,
      }),
  );
  for (const c of clients) c.on('error', () => undefined);
  const last: Array<number | undefined> = nodes.map(() => undefined);
  let stopped = false;
  const loops = clients.map(async (client, i) => {
    while (!stopped) {
      try {
        const [value, expiry] = (await client.eval(READ, 1, redisKey)) as [string | null, number];
        if (value === token && expiry > 0) last[i] = expiry;
      } catch {
        // A node being killed or restarted: read it again.
      }
      await new Promise((r) => setTimeout(r, 2));
    }
  });
  return {
    async stop() {
      stopped = true;
      await Promise.all(loops);
      for (const c of clients) c.disconnect();
      return last;
    },
  };
}

/**
 * The moment a majority (`needed` of the nodes) no longer held the token: the `needed`-th
 * earliest expiry (a node that never held it counts as free from the start).
 */
export function grantableAt(expiries: ReadonlyArray<number | undefined>, needed: number): number {
  const sorted = expiries.map((e) => e ?? -Infinity).sort((a, b) => a - b);
  return sorted[needed - 1];
}
