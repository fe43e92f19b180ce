import type { Metrics } from '../shapes/shape';
import { formatNumber, type Column } from './bench-report';

/**
 * The one-line summary of a shape's metrics printed while the run goes on: the measured columns
 * of the shape's report table that this run has, as `header value`.
 * @example progressLine(columns, metrics) // 'pairs/s 11,003, requests/pair 2.00, …'
 */
export function progressLine(columns: readonly Column[], metrics: Metrics): string {
  return columns
    .filter((c) => !c.derived && metrics[c.metric] !== undefined)
    .map((c) => `${c.header} ${formatNumber(metrics[c.metric], c.sum ? 0 : c.digits)}`)
    .join(', ');
}
