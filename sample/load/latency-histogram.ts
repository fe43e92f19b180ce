/** Bucket bounds in ms: 1-2-5 steps, so that a few buckets cover 1 ms to 10 s. */
const BOUNDS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000];

/**
 * A small text histogram of latencies: one line per bucket from the fastest to the slowest
 * non-empty one, with a bar scaled to the fullest bucket and the count.
 * @param latenciesMs one value per response
 * @param width characters of the longest bar
 * @example
 * console.log(latencyHistogram([3, 4, 4, 4, 12], 8));
 * //         2–5 ms | ████████ 4
 * //        5–10 ms | 0
 * //       10–20 ms | ██ 1
 */
export function latencyHistogram(latenciesMs: readonly number[], width = 40): string {
  if (latenciesMs.length === 0) return '(no responses)';
  const counts = new Array<number>(BOUNDS.length + 1).fill(0);
  for (const ms of latenciesMs) {
    const i = BOUNDS.findIndex((bound) => ms < bound);
    counts[i === -1 ? BOUNDS.length : i]++;
  }
  const first = counts.findIndex((n) => n > 0);
  const last = counts.length - 1 - [...counts].reverse().findIndex((n) => n > 0);
  const most = Math.max(...counts);
  const lines: string[] = [];
  for (let i = first; i <= last; i++) {
    const lower = i === 0 ? 0 : BOUNDS[i - 1];
    const label = i === BOUNDS.length ? `≥ ${lower} ms` : `${lower}–${BOUNDS[i]} ms`;
    const bar = '█'.repeat(
      counts[i] === 0 ? 0 : Math.max(1, Math.round((counts[i] / most) * width)),
    );
    lines.push(`${label.padStart(14)} | ${bar ? `${bar} ` : ''}${counts[i]}`);
  }
  return lines.join('\n');
}
