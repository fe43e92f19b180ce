import type { Cluster, Redis } from 'ioredis';
import type { RedisLockConnection } from '../redis/redis-connection';

/** Keys one `SCAN` call asks Redis to look at. */
const SCAN_COUNT = 1_000;

/** What a bounded scan found. */
export interface ScanResult {
  keys: string[];
  /** The budget ran out before the scan was complete: there may be more keys. */
  truncated: boolean;
}

/** Escapes the glob characters of `text` for a `SCAN ... MATCH` pattern. */
export function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/**
 * The keys matching `pattern` (optionally of one `type`), examining at most `budget` keys with
 * `SCAN` (on Cluster, on each master in turn): never `KEYS`, never a call without a bound.
 */
export async function scanKeys(
  connection: RedisLockConnection,
  pattern: string,
  budget: number,
  type?: 'string',
): Promise<ScanResult> {
  const nodes = connection.isCluster
    ? (connection.client as Cluster).nodes('master')
    : [connection.client as Redis];
  const keys = new Set<string>();
  let examined = 0;
  for (const node of nodes) {
    let cursor = '0';
    do {
      const count = Math.min(SCAN_COUNT, budget - examined);
      if (count <= 0) return { keys: [...keys], truncated: true };
      const args = type ? ['TYPE', type] : [];
      const [next, found] = await connection.call('dashboard SCAN', () =>
        (node.scan as (...a: unknown[]) => Promise<[string, string[]]>)(
          cursor,
          'MATCH',
          pattern,
          'COUNT',
          count,
          ...args,
        ),
      );
      examined += count;
      for (const key of found) keys.add(key);
      cursor = next;
    } while (cursor !== '0');
  }
  return { keys: [...keys], truncated: false };
}
