import type * as OtelApi from '@opentelemetry/api';

/**
 * `@opentelemetry/api` when the application has it (an optional peer dependency), loaded once;
 * `undefined` otherwise, and then nothing of this folder records anything.
 */
export const otelApi: typeof OtelApi | undefined = load();

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
  if (!otelApi) return undefined;
  const meter = otelApi.metrics.getMeter('nestjs-redis-lock');
  const noop = otelApi.createNoopMeter();
  return meter.constructor === noop.constructor ? undefined : meter;
}
