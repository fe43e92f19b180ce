import { MetricReader, type DataPoint } from '@opentelemetry/sdk-metrics';

/** A metric reader that collects on demand (the SDK's reader base class, no export loop). */
export class OnDemandReader extends MetricReader {
  protected onForceFlush = () => Promise.resolve();
  protected onShutdown = () => Promise.resolve();

  /** Collects now: the data points of metric `name`, as `attributes JSON -> point`. */
  async points(name: string): Promise<Map<string, DataPoint<unknown>>> {
    const { resourceMetrics, errors } = await this.collect();
    if (errors.length > 0) throw new AggregateError(errors, 'metric collection failed');
    const out = new Map<string, DataPoint<unknown>>();
    for (const scope of resourceMetrics.scopeMetrics) {
      for (const metric of scope.metrics) {
        if (metric.descriptor.name !== name) continue;
        for (const p of metric.dataPoints as DataPoint<unknown>[]) {
          out.set(JSON.stringify(p.attributes), p);
        }
      }
    }
    return out;
  }
}
