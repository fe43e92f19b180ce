import { Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { WithLockExplorer } from './decorators/with-lock.explorer';
import { LockInterceptor } from './interceptors/lock.interceptor';
import { QueueService } from './queue/queue.service';
import { QueueWorkerExplorer } from './queue/queue-worker.explorer';
import { QueueEventExplorer } from './queue/queue-event.explorer';
import { LockService } from './lock/lock.service';
import { SemaphoreService } from './semaphore/semaphore.service';
import { FencedStore } from './fencing/fenced-store';
import { RedisLockEvents } from './events/redis-lock-events';
import { observeQueues, recordQueueMetrics } from './observability/metrics';
import { queueBacklog } from './observability/queue-backlog';
import { resolveModuleOptions } from './options/resolve-options';
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
  ) {
    super();
    const stopEvents = recordQueueMetrics(events);
    const stopGauges = observeQueues({
      workerQueues: () => queues.workerQueues(),
      backlog: (queue) => queueBacklog(queues, queue),
    });
    this.stopMetrics = () => {
      stopEvents();
      stopGauges();
    };
  }

  /** Closes the connections the module opened (never a client passed in by the user). */
  async onApplicationShutdown(): Promise<void> {
    this.stopMetrics();
    await this.connection.close();
  }
}

/** Bound of the boot checks (Cluster node, eviction policy) without `connectTimeoutMs`, in ms. */
const BOOT_CHECK_MS = 1_000;

/**
 * With `connectTimeoutMs`: PINGs Redis before anything of the module starts, and on no answer in
 * time closes the connections and fails the start with `RedisUnavailableError`. Always: fails the
 * start with `RedisLockOptionsError` when a single-node connection reaches a Redis Cluster node,
 * and checks every master's `maxmemory-policy` (`evictionPolicy`: a warning per master, or with
 * `'fail'` `RedisLockOptionsError`). Both checks run side by side, each call bounded by
 * `connectTimeoutMs` (else 1 s) and `commandTimeoutMs`; no answer is no verdict.
 */
async function connectOrFail(connection: RedisLockConnection): Promise<RedisLockConnection> {
  const { connectTimeoutMs: ms, commandTimeoutMs, evictionPolicy } = connection.options;
  try {
    if (ms !== undefined) await connection.call('PING (connectTimeoutMs)', (c) => c.ping(), ms);
    const bound = Math.min(ms ?? BOOT_CHECK_MS, commandTimeoutMs);
    const checks = await Promise.allSettled([
      connection.checkNotClusterNode(bound),
      connection.checkEvictionPolicy(bound, evictionPolicy),
    ]);
    for (const check of checks) if (check.status === 'rejected') throw check.reason;
  } catch (err) {
    await connection.close().catch(() => undefined);
    throw err;
  }
  return connection;
}
