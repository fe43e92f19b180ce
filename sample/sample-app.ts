import type { INestApplication, NestApplicationOptions } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { SampleAppModule } from './app.module';
import { SampleConfig, type SampleConfigValues } from './config/sample-config';

/**
 * Creates the sample application (not listening yet) on the given Redis URL and key prefix;
 * every value left out takes its default (see `SampleConfig`).
 * @example
 * const app = await createSampleApp({ redisUrl: 'redis://127.0.0.1:6379', keyPrefix: 'shop:' });
 * await app.listen(3000);
 */
export async function createSampleApp(
  config: SampleConfig | Partial<SampleConfigValues> = {},
  options: NestApplicationOptions = {},
): Promise<INestApplication> {
  const resolved = config instanceof SampleConfig ? config : new SampleConfig(config);
  return NestFactory.create(SampleAppModule.forRoot(resolved), {
    logger: ['warn', 'error'],
    ...options,
  });
}
