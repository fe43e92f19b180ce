import type { Metrics } from '../shapes/shape';
import { spread, type Spread } from './bench-stats';

/** What one shape measured for one library in one round (or why it could not). */
export interface RunRecord {
  shape: string;
  library: string;
  round: number;
  /** What the shape measured. */
  metrics?: Metrics;
  /** Values computed afterwards from measured ones (see `bench/support/derived-metrics.ts`). */
  derived?: Metrics;
  error?: string;
}

/** Which part of a record a metric is read from. */
export type MetricSource = 'metrics' | 'derived';

/** Per-metric summary over the rounds of one shape and library. */
export interface MetricSummary extends Spread {
  /** Sum over rounds (used for counts such as overlaps and failures). */
  sum: number;
  /** Rounds that measured it. */
  rounds: number;
}

/** Every record of a run, and their summaries. */
export class RunResults {
  readonly records: RunRecord[] = [];

  add(record: RunRecord): void {
    this.records.push(record);
  }

  /** The metrics of `shape` for `library` in `round`, if that run succeeded. */
  metricsOf(shape: string, library: string, round: number): Metrics | undefined {
    return this.records.find((r) => r.shape === shape && r.library === library && r.round === round)
      ?.metrics;
  }

  /** Summary of one metric over the rounds; `undefined` when no round measured it. */
  summary(
    shape: string,
    library: string,
    metric: string,
    from: MetricSource = 'metrics',
  ): MetricSummary | undefined {
    const values = this.records
      .filter((r) => r.shape === shape && r.library === library)
      .map((r) => r[from]?.[metric])
      .filter((v): v is number => v !== undefined);
    if (values.length === 0) return undefined;
    return {
      ...spread(values),
      sum: values.reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0),
      rounds: values.length,
    };
  }

  /** The median of one metric over the rounds, `NaN` when unmeasured. */
  median(shape: string, library: string, metric: string): number {
    return this.summary(shape, library, metric)?.median ?? NaN;
  }

  /** Error messages of failed runs of `shape` for `library`. */
  errors(shape: string, library: string): string[] {
    return this.records
      .filter((r) => r.shape === shape && r.library === library && r.error)
      .map((r) => `round ${r.round}: ${r.error}`);
  }

  /** Every summary of measured (or derived) values, shape → library → metric, for results.json. */
  summaries(
    from: MetricSource = 'metrics',
  ): Record<string, Record<string, Record<string, MetricSummary>>> {
    const out: Record<string, Record<string, Record<string, MetricSummary>>> = {};
    for (const r of this.records) {
      const values = r[from];
      if (!values) continue;
      const byLibrary = (out[r.shape] ??= {});
      const byMetric = (byLibrary[r.library] ??= {});
      for (const metric of Object.keys(values)) {
        byMetric[metric] ??= this.summary(r.shape, r.library, metric, from)!;
      }
    }
    return out;
  }
}
