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

/** The meter of this library (the API's no-op meter until the application registers an SDK). */
export function libraryMeter(): OtelApi.Meter | undefined {
  return otelApi?.metrics.getMeter('nestjs-redis-lock');
}
