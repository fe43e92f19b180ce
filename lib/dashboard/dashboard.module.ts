import { type DynamicModule, Module } from '@nestjs/common';
import { type RedisLockDashboardOptions, resolveDashboardOptions } from './dashboard-options';
import { DashboardCore } from './dashboard-core';
import { DashboardRecorder } from './dashboard-recorder';
import { createDashboardController } from './dashboard.controller';
import { DASHBOARD_OPTIONS } from './dashboard.constants';
import { DashboardService } from './dashboard.service';

/**
 * A live page of the app's locks and queues, served by the app itself: held locks with their
 * owners and lines, recent lock timeouts and lost locks, queue counts with a throughput
 * sparkline, dead letters with requeue / delete, pause / resume. Needs `RedisLockModule` imported
 * in any module of the app (global or not: the dashboard finds it at start, and fails the start
 * with `RedisLockOptionsError` when there is none). Guard classes are made by this module's
 * injector (as for any `@UseGuards`), so their dependencies must come from global modules. Mount
 * it only behind `guards` that admit operators: it shows lock keys and task payloads.
 * @example
 * @Module({
 *   imports: [
 *     RedisLockModule.forRoot({ redis: process.env.REDIS_URL }),
 *     RedisLockDashboardModule.forRoot({ path: '/ops/locks', guards: [AdminGuard] }),
 *   ],
 * })
 * export class AppModule {}
 */
@Module({})
export class RedisLockDashboardModule {
  /**
   * @param options see `RedisLockDashboardOptions`
   * @throws RedisLockOptionsError naming the offending option and value
   */
  static forRoot(options: RedisLockDashboardOptions = {}): DynamicModule {
    const resolved = resolveDashboardOptions(options);
    return {
      module: RedisLockDashboardModule,
      controllers: [createDashboardController(resolved)],
      providers: [
        { provide: DASHBOARD_OPTIONS, useValue: resolved },
        DashboardCore,
        DashboardService,
        DashboardRecorder,
      ],
    };
  }
}
