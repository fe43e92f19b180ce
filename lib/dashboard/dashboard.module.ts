import {
  type DynamicModule,
  Inject,
  type MiddlewareConsumer,
  Module,
  type NestModule,
  type OnModuleInit,
  RequestMethod,
  type Type,
} from '@nestjs/common';
import { RedactingLogger } from '../redaction/redacting-logger';
import {
  type RedisLockDashboardOptions,
  type ResolvedDashboardOptions,
  resolveDashboardOptions,
} from './dashboard-options';
import { DashboardCore } from './dashboard-core';
import { dashboardHeaders } from './dashboard-headers.middleware';
import { DashboardOverviewThrottle } from './dashboard-overview-throttle';
import { DashboardRecorder } from './dashboard-recorder';
import { createDashboardController } from './dashboard.controller';
import { DASHBOARD_CONTROLLER, DASHBOARD_OPTIONS } from './dashboard.constants';
import { DashboardService } from './dashboard.service';

/**
 * A live page of the app's locks and queues, served by the app itself: held locks with their
 * owners and lines, recent lock timeouts and lost locks, queue counts with a throughput
 * sparkline, dead letters with requeue / delete, pause / resume. Needs `RedisLockModule` imported
 * in any module of the app (global or not: the dashboard finds it at start, and fails the start
 * with `RedisLockOptionsError` when there is none). Guard classes are made by this module's
 * injector (as for any `@UseGuards`), so their dependencies must come from global modules. Mount
 * it only behind `guards` that admit operators: it shows lock keys and task payloads, results and
 * errors. Without guards it is read-only (unless `readOnly: false`) and warns at start that it is
 * open to anyone who can reach the app. Every response carries `X-Frame-Options: DENY` and a CSP
 * with `frame-ancestors 'none'`.
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
export class RedisLockDashboardModule implements NestModule, OnModuleInit {
  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    @Inject(DASHBOARD_CONTROLLER) private readonly controller: Type<unknown>,
  ) {}

  /**
   * @param options see `RedisLockDashboardOptions`
   * @throws RedisLockOptionsError naming the offending option and value
   */
  static forRoot(options: RedisLockDashboardOptions = {}): DynamicModule {
    const resolved = resolveDashboardOptions(options);
    const controller = createDashboardController(resolved);
    return {
      module: RedisLockDashboardModule,
      controllers: [controller],
      providers: [
        { provide: DASHBOARD_OPTIONS, useValue: resolved },
        { provide: DASHBOARD_CONTROLLER, useValue: controller },
        DashboardCore,
        DashboardService,
        DashboardOverviewThrottle,
        DashboardRecorder,
      ],
    };
  }

  /**
   * The security headers on every response of the page, its assets and its API, and on the 404
   * of any other path under it.
   */
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(dashboardHeaders).forRoutes(this.controller, {
      path: `${this.options.path}/*rest`,
      method: RequestMethod.ALL,
    });
  }

  /** Warns, once at start, when no guard stands in front of the page. */
  onModuleInit(): void {
    const warning = unguardedWarning(this.options);
    if (warning) new RedactingLogger('RedisLockDashboard').warn(warning);
  }
}

/** The start-up warning of a dashboard without guards; `undefined` when it has guards. */
function unguardedWarning(options: ResolvedDashboardOptions): string | undefined {
  if (options.guards.length > 0) return undefined;
  const actions = options.readOnly
    ? 'It is read-only, but read-only still shows'
    : 'readOnly: false lets anyone pause, resume, cancel, delete and requeue, and it shows';
  return (
    `the dashboard at '/${options.path}' has no guards: it is open to anyone who can reach the ` +
    `app. ${actions} every lock key and every task's payload, result and error. Put a guard in ` +
    'front of it (RedisLockDashboardModule.forRoot({ guards: [AdminGuard] })); docs/dashboard.md'
  );
}
