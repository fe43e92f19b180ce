import {
  type DynamicModule,
  type MiddlewareConsumer,
  Module,
  type NestModule,
} from '@nestjs/common';
import { APP_FILTER, APP_INTERCEPTOR } from '@nestjs/core';
import { LockInterceptor, RedisLockDashboardModule, RedisLockModule } from '../lib';
import { JsonBodyMiddleware } from './common/json-body.middleware';
import { SampleErrorFilter } from './common/sample-error.filter';
import { redisLockOptionsFactory } from './config/redis-lock-options.factory';
import { SampleConfig } from './config/sample-config';
import { SampleConfigModule } from './config/sample-config.module';
import { OrdersDatabaseModule } from './database/orders-database';
import { FlashSaleModule } from './flash-sale/flash-sale.module';
import { SampleMetricsModule } from './metrics/sample-metrics.module';
import { SampleRedisModule } from './redis/sample-redis';
import { TaskDeskModule } from './task-desk/task-desk.module';

/**
 * The sample application: the flash sale and the task desk on one Redis (the flash sale's orders
 * in PostgreSQL), and the dashboard.
 * `RedisLockModule` is configured through `forRootAsync` from the injected `SampleConfig`;
 * `LockInterceptor` is global, so a lock that can't be had in time answers `423 Locked`; a body
 * in anything but JSON is answered `415` (`JsonBodyMiddleware`).
 * @example
 * const app = await NestFactory.create(SampleAppModule.forRoot(loadSampleConfig(process.env)));
 */
@Module({})
export class SampleAppModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(JsonBodyMiddleware).forRoutes('*path');
  }

  static forRoot(config: SampleConfig): DynamicModule {
    const configModule = SampleConfigModule.forRoot(config);
    return {
      module: SampleAppModule,
      imports: [
        // First: the meter provider must exist before the lock module makes its instruments.
        SampleMetricsModule.forRoot(),
        configModule,
        RedisLockModule.forRootAsync({
          imports: [configModule],
          inject: [SampleConfig],
          useFactory: redisLockOptionsFactory,
          isGlobal: true,
        }),
        // The live page of locks and queues at /redis-lock: without guards it is read-only and
        // warns at start. An app reachable by others passes `guards: [AdminGuard]`, which also
        // turns the actions on (see docs/dashboard.md).
        RedisLockDashboardModule.forRoot({ path: '/redis-lock' }),
        SampleRedisModule,
        OrdersDatabaseModule,
        FlashSaleModule,
        TaskDeskModule,
      ],
      providers: [
        { provide: APP_INTERCEPTOR, useClass: LockInterceptor },
        { provide: APP_FILTER, useClass: SampleErrorFilter },
      ],
    };
  }
}
