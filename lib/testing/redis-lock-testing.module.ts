import { Inject, Module, type DynamicModule, type OnApplicationShutdown } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import type { RedisLockModuleOptions } from '../interfaces/redis-lock-module-options.interface';
import { RedisLockModule } from '../redis-lock.module';
import { MemoryRedis } from './memory/memory-redis';
import { MemoryRedisServer } from './memory/memory-redis-server';
import { RedisLockTesting } from './redis-lock-testing';

/** Options of `RedisLockTestingModule.forRoot`: the module's options, without a Redis. */
export interface RedisLockTestingOptions extends Omit<RedisLockModuleOptions, 'redis' | 'nodes'> {
  /**
   * The in-memory Redis to use, e.g. one shared by two applications of a test (two instances of
   * a service, each with its own module). @default a new, empty one per `forRoot` call
   */
  server?: MemoryRedisServer;
  /** Registers the module's services (and `RedisLockTesting`) globally. @default false */
  isGlobal?: boolean;
}

/**
 * `RedisLockModule` for unit tests, with no Redis anywhere: registers what
 * `RedisLockModule.forRoot` does (LockService, QueueService, SemaphoreService,
 * RateLimiterService, FencedStore, RedisLockEvents, LockInterceptor, `@WithLock`,
 * `@WithSemaphore`, `@QueueWorker`, `@OnQueueEvent`, `@OncePerTick`) on an in-memory Redis in
 * the test process that runs the library's own Lua scripts (in fengari, a dev dependency to
 * install), plus `RedisLockTesting` (run workers until idle, see what was enqueued). Time is
 * `Date.now()` and timers, so Jest's fake timers drive TTLs, delays, backoffs and lease expiry.
 * Nothing is left open after `app.close()`.
 * @param options the module's options (prefix, lock and queue defaults…), without `redis`
 * @example
 * const moduleRef = await Test.createTestingModule({
 *   imports: [RedisLockTestingModule.forRoot()],
 *   providers: [OrdersService],
 * }).compile();
 * const app = await moduleRef.init();
 */
@Module({})
export class RedisLockTestingModule implements OnApplicationShutdown {
  constructor(@Inject(MemoryRedis) private readonly client: MemoryRedis) {}

  static forRoot(options: RedisLockTestingOptions = {}): DynamicModule {
    const { server = new MemoryRedisServer(), isGlobal, ...moduleOptions } = options;
    if (!(server instanceof MemoryRedisServer)) {
      throw new RedisLockOptionsError('server', server, 'a MemoryRedisServer');
    }
    const client = new MemoryRedis(server);
    return {
      module: RedisLockTestingModule,
      global: isGlobal,
      imports: [
        RedisLockModule.forRoot({ ...moduleOptions, redis: client as unknown as Redis, isGlobal }),
      ],
      providers: [
        { provide: MemoryRedisServer, useValue: server },
        { provide: MemoryRedis, useValue: client },
        RedisLockTesting,
      ],
      exports: [RedisLockModule, RedisLockTesting, MemoryRedisServer, MemoryRedis],
    };
  }

  /** Closes the in-memory client (the module closes the connections it made from it). */
  onApplicationShutdown(): void {
    this.client.disconnect();
  }
}
