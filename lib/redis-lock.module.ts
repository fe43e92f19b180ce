import { Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { WithLockExplorer } from './decorators/with-lock.explorer';
import { LockInterceptor } from './interceptors/lock.interceptor';
import { QueueService } from './queue/queue.service';
import { QueueWorkerExplorer } from './queue/queue-worker.explorer';
import { QueueEventExplorer } from './queue/queue-event.explorer';
import { LockService } from './lock/lock.service';
import { RateLimiterService } from './rate-limit/rate-limiter.service';
import { SemaphoreService } from './semaphore/semaphore.service';
import { WaitingRoomService } from './waiting-room/waiting-room.service';
import { FencedStore } from './fencing/fenced-store';
import { RedisLockEvents } from './events/redis-lock-events';
import { observeModule } from './observability/observe-module';
import { resolveModuleOptions } from './options/resolve-options';
import { connectOrFail } from './redis/connect-or-fail';
import { RedisLockConnection } from './redis/redis-connection';
import { TickClaims } from './schedule/tick-claims';
import { REDIS_LOCK_RESOLVED_OPTIONS } from './redis-lock.constants';
import { ConfigurableModuleClass, REDIS_LOCK_MODULE_OPTIONS } from './redis-lock.module-definition';
import type { RedisLockModuleOptions } from './interfaces/redis-lock-module-options.interface';

/**
 * Provides `LockService` (and the queue services) on one Redis.
 * @example
 * RedisLockModule.forRoot({ redis: process.env.REDIS_URL, isGlobal: true })
 * RedisLockModule.forRootAsync({ inject: [ConfigService], useFactory: (c) => ({ redis: c.get('REDIS_URL') }) })
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    {
      provide: REDIS_LOCK_RESOLVED_OPTIONS,
      inject: [REDIS_LOCK_MODULE_OPTIONS],
      useFactory: (options: RedisLockModuleOptions) => resolveModuleOptions(options),
    },
    {
      provide: RedisLockConnection,
      inject: [REDIS_LOCK_RESOLVED_OPTIONS],
      useFactory: (options: ReturnType<typeof resolveModuleOptions>) =>
        connectOrFail(new RedisLockConnection(options)),
    },
    LockService,
    SemaphoreService,
    RateLimiterService,
    WaitingRoomService,
    FencedStore,
    RedisLockEvents,
    QueueService,
    QueueWorkerExplorer,
    QueueEventExplorer,
    LockInterceptor,
    WithLockExplorer,
    TickClaims,
  ],
  exports: [
    LockService,
    SemaphoreService,
    RateLimiterService,
    WaitingRoomService,
    FencedStore,
    QueueService,
    LockInterceptor,
    RedisLockEvents,
    // For RedisLockHealthIndicator (nestjs-redis-lock/health): it checks the module's connections.
    RedisLockConnection,
  ],
})
export class RedisLockModule extends ConfigurableModuleClass implements OnApplicationShutdown {
  private readonly stopMetrics: () => void;

  constructor(
    @Inject(RedisLockConnection) private readonly connection: RedisLockConnection,
    @Inject(RedisLockEvents) events: RedisLockEvents,
    @Inject(QueueService) queues: QueueService,
    @Inject(LockService) locks: LockService,
    @Inject(SemaphoreService) semaphores: SemaphoreService,
    @Inject(WaitingRoomService) waitingRoom: WaitingRoomService,
  ) {
    super();
    this.stopMetrics = observeModule(events, queues);
    // Nest calls the providers' beforeApplicationShutdown all at once: the workers must drain
    // (their handlers may take locks and permits until they finish) before the others refuse
    // new callers and release what they hold.
    const drained = () => queues.beforeApplicationShutdown();
    for (const service of [locks, semaphores, waitingRoom]) service.shutdownAfter = drained;
  }

  /** Closes the connections the module opened (never a client passed in by the user). */
  async onApplicationShutdown(): Promise<void> {
    this.stopMetrics();
    await this.connection.close();
  }
}
