/** Summary of one metric over the rounds of a run. */
export interface Spread {
  median: number;
  min: number;
  max: number;
}

/**
 * The `p`-th percentile (0–100) of `values`, nearest-rank method; `NaN` when there are none.
 * @example percentile([1, 2, 3, 4], 50) // 2
 */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

/** The median of `values` (mean of the two middle values for an even count); `NaN` when empty. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Median, minimum and maximum of the finite values among `values`. */
export function spread(values: readonly number[]): Spread {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return { median: NaN, min: NaN, max: NaN };
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite) };
}

/**
 * Jain's fairness index of per-participant shares: `(Σx)² / (n·Σx²)`. 1 when every participant
 * got the same share, `1/n` when one got everything; `NaN` for no participants or no shares.
 * @example jainIndex([10, 10, 10]) // 1
 */
export function jainIndex(shares: readonly number[]): number {
  const sum = shares.reduce((a, b) => a + b, 0);
  const squares = shares.reduce((a, b) => a + b * b, 0);
  if (shares.length === 0 || squares === 0) return NaN;
  return (sum * sum) / (shares.length * squares);
}
