import { type DynamicModule, Module } from '@nestjs/common';
import { SampleConfig } from './sample-config';

/**
 * Provides the `SampleConfig` (globally, so every feature module can inject it).
 * @example
 * SampleConfigModule.forRoot(loadSampleConfig(process.env))
 */
@Module({})
export class SampleConfigModule {
  static forRoot(config: SampleConfig): DynamicModule {
    return {
      module: SampleConfigModule,
      global: true,
      providers: [{ provide: SampleConfig, useValue: config }],
      exports: [SampleConfig],
    };
  }
}
