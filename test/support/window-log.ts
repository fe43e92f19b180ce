import type { Cluster, Redis } from 'ioredis';

/**
 * Reads a sliding window's log (`<prefix>rate:{key}`) every 25 ms until `stop`, keeping every
 * member seen with its score (the Redis time it was admitted at). Each entry stays in the log for
 * at least `windowMs` (only a later consume trims it), so the reads see every admitted unit as
 * long as no two answers are `windowMs` apart; `stop` reads once more and throws when they were
 * (the machine too loaded to tell), then resolves with the admission times, sorted.
 */
export function readWindowLog(
  reader: Redis | Cluster,
  log: string,
  windowMs: number,
): { stop(): Promise<number[]> } {
  const seen = new Map<string, number>();
  let reading = true;
  let last = performance.now();
  let gap = 0;
  const read = async () => {
    const entries = await reader.zrange(log, 0, -1, 'WITHSCORES');
    // Time between two answers (an upper bound of the time between two reads in Redis).
    gap = Math.max(gap, performance.now() - last);
    last = performance.now();
    for (let i = 0; i < entries.length; i += 2) seen.set(entries[i], Number(entries[i + 1]));
  };
  const loop = (async () => {
    while (reading) {
      await read();
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  return {
    async stop() {
      reading = false;
      await loop;
      await read(); // what was admitted since the last read
      if (gap >= windowMs) {
        throw new Error(`the log was not read for ${Math.round(gap)} ms: machine too loaded`);
      }
      return [...seen.values()].sort((a, b) => a - b);
    },
  };
}

/** The most admission `times` (sorted) that fall in one window of `windowMs`. */
export function busiestWindow(times: readonly number[], windowMs: number): number {
  let worst = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[j] <= times[i] - windowMs) j++;
    worst = Math.max(worst, i - j + 1);
  }
  return worst;
}
