import type * as OtelApi from '@opentelemetry/api';

/** The name of this library's meter and tracer. */
export const INSTRUMENTATION_NAME = 'nestjs-redis-lock';

/**
 * `@opentelemetry/api` when the application has it (an optional peer dependency), loaded once;
 * `undefined` otherwise, and then nothing of this folder records anything.
 */
export const otelApi: typeof OtelApi | undefined = load();

/**
 * @internal The module's switch for its OpenTelemetry calls (the overhead bench turns it off to
 * compare against no OTel calls at all). Read when a service makes its instruments and tracer.
 */
export const instrumentation = { enabled: true };

function load(): typeof OtelApi | undefined {
  try {
    return require('@opentelemetry/api') as typeof OtelApi;
  } catch {
    return undefined;
  }
}

/**
 * The meter of this library, or `undefined` without the API or while no SDK is registered (the
 * API's no-op meter): callers then skip building attributes at all.
 */
export function libraryMeter(): OtelApi.Meter | undefined {
  if (!otelApi || !instrumentation.enabled) return undefined;
  const meter = otelApi.metrics.getMeter(INSTRUMENTATION_NAME);
  const noop = otelApi.createNoopMeter();
  return meter.constructor === noop.constructor ? undefined : meter;
}

/**
 * The tracer of this library, or `undefined` without the API or while no SDK tracer provider is
 * registered: the global provider is then the API's proxy without a delegate, whose spans are
 * non-recording; skipping them keeps the hot paths at one `undefined` check.
 */
export function libraryTracer(): OtelApi.Tracer | undefined {
  if (!otelApi || !instrumentation.enabled) return undefined;
  const provider = otelApi.trace.getTracerProvider();
  return provider instanceof otelApi.ProxyTracerProvider
    ? provider.getDelegateTracer(INSTRUMENTATION_NAME)
    : provider.getTracer(INSTRUMENTATION_NAME);
}
