import { Controller, type DynamicModule, Get, Module, Req, Res } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { PrometheusExporter } from '@opentelemetry/exporter-prometheus';

let exporter: PrometheusExporter | undefined | null = null;

/**
 * The process's Prometheus exporter, registered once as the global OpenTelemetry meter provider's
 * reader; `undefined` when `@opentelemetry/exporter-prometheus` or `@opentelemetry/sdk-metrics`
 * is not installed (then the sample has no `/metrics`).
 */
export function prometheusExporter(): PrometheusExporter | undefined {
  if (exporter === null) {
    try {
      const { PrometheusExporter: Exporter } = require('@opentelemetry/exporter-prometheus');
      const { MeterProvider } = require('@opentelemetry/sdk-metrics');
      const { metrics } = require('@opentelemetry/api');
      const created: PrometheusExporter = new Exporter({ preventServerStart: true });
      metrics.setGlobalMeterProvider(new MeterProvider({ readers: [created] }));
      exporter = created;
    } catch {
      exporter = undefined;
    }
  }
  return exporter;
}

@Controller('metrics')
class MetricsController {
  /** Prometheus text format of every instrument (the library's lock and queue series). */
  @Get()
  scrape(@Req() req: IncomingMessage, @Res() res: ServerResponse): void {
    prometheusExporter()!.getMetricsRequestHandler(req, res);
  }
}

/**
 * `GET /metrics` through OpenTelemetry's Prometheus exporter, when it is installed. `forRoot`
 * registers the meter provider before the lock module starts, so its instruments report there.
 */
@Module({})
export class SampleMetricsModule {
  static forRoot(): DynamicModule {
    return prometheusExporter()
      ? { module: SampleMetricsModule, controllers: [MetricsController] }
      : { module: SampleMetricsModule };
  }
}
