import { RedisLockEvents } from '../events/redis-lock-events';
import { FencedStore } from '../fencing/fenced-store';
import type { RedisLockModuleOptions } from '../interfaces/redis-lock-module-options.interface';
import { LockService } from '../lock/lock.service';
import { observeModule } from '../observability/observe-module';
import { resolveModuleOptions } from '../options/resolve-options';
import { QueueService } from '../queue/queue.service';
import { RateLimiterService } from '../rate-limit/rate-limiter.service';
import { connectOrFail } from '../redis/connect-or-fail';
import { RedisLockConnection } from '../redis/redis-connection';
import { SemaphoreService } from '../semaphore/semaphore.service';
import { WaitingRoomService } from '../waiting-room/waiting-room.service';

/** What `createRedisLock` returns: the module's services, outside Nest. */
export interface RedisLock {
  /** Locks: `acquire`, `tryAcquire`, `withLock`, … (see `LockService`). */
  readonly locks: LockService;
  /** The queue: `enqueue`, `process`, `waitFor`, … (see `QueueService`). */
  readonly queues: QueueService;
  /** Semaphores: `acquire`, `withPermit`, … (see `SemaphoreService`). */
  readonly semaphores: SemaphoreService;
  /** Distributed rate limits: `consume` (see `RateLimiterService`). */
  readonly rateLimiter: RateLimiterService;
  /** Fair waiting rooms: `open`, `join`, `wait`, `hasPass` (see `WaitingRoomService`). */
  readonly waitingRoom: WaitingRoomService;
  /** Fenced writes guarded by a lock's fence (see `FencedStore`). */
  readonly fenced: FencedStore;
  /** In-process events: `lock.lost`, `task.completed`, … (see `RedisLockEvents`). */
  readonly events: RedisLockEvents;
  /**
   * Shuts down as the module does when a Nest application closes: stops firing schedules, stops
   * the workers started with `queues.process` (they finish or give back their tasks; meanwhile
   * their handlers can still take locks and permits), then takes this process's waiters out of
   * every line, releases every lock and permit it holds, and closes the connections it opened
   * (never a client passed in `redis`). Resolves once all of that is done; calling it again
   * returns the same promise.
   */
  close(): Promise<void>;
}

/**
 * The library without Nest: the same services as `RedisLockModule.forRoot(options)`, the same
 * options and the same checks (a bad option rejects with `RedisLockOptionsError`; with
 * `connectTimeoutMs`, a Redis out of reach rejects with `RedisUnavailableError`), for a plain
 * Node service, a script or a CLI. No Nest application or container is created; the decorators
 * (`@WithLock`, `@QueueWorker`, `@OnQueueEvent`) need one, so workers are started with
 * `queues.process`. Call `close()` when done: until then its connections keep the process alive.
 * @param options as for `RedisLockModule.forRoot` (`isGlobal` is accepted and means nothing here)
 * @example
 * const redisLock = await createRedisLock({ redis: process.env.REDIS_URL, keyPrefix: 'shop:' });
 * await redisLock.queues.enqueue('receipts', 'order-42', { payload: { amount: 5 } });
 * await redisLock.locks.withLock('report:daily', async () => buildReport());
 * await redisLock.close();
 */
export async function createRedisLock(
  options: RedisLockModuleOptions & { isGlobal?: boolean },
): Promise<RedisLock> {
  const connection = await connectOrFail(
    new RedisLockConnection(resolveModuleOptions(withoutIsGlobal(options))),
  );
  const events = new RedisLockEvents();
  const locks = new LockService(connection, events);
  const queues = new QueueService(connection, events);
  const semaphores = new SemaphoreService(connection);
  const fenced = new FencedStore(connection);
  const rateLimiter = new RateLimiterService(connection);
  const waitingRoom = new WaitingRoomService(connection);
  // The lifecycle hooks in the order Nest calls them: init, bootstrap; destroy, before shutdown,
  // shutdown.
  locks.onModuleInit();
  const stopMetrics = observeModule(events, queues);
  await queues.onApplicationBootstrap();
  let closing: Promise<void> | undefined;
  const close = async () => {
    queues.onModuleDestroy();
    // The workers drain first: their handlers may take locks, permits and places until they
    // finish, and only then are new callers refused and what this process holds released.
    await queues.beforeApplicationShutdown();
    await Promise.all([
      waitingRoom.beforeApplicationShutdown(),
      locks.beforeApplicationShutdown(),
      semaphores.beforeApplicationShutdown(),
    ]);
    stopMetrics();
    await connection.close();
  };
  return {
    locks,
    queues,
    semaphores,
    rateLimiter,
    waitingRoom,
    fenced,
    events,
    close: () => (closing ??= close()),
  };
}

/**
 * The options without forRoot's `isGlobal` (Nest's module builder takes it off before the
 * options are read; here it means nothing), so that one options object serves both.
 */
function withoutIsGlobal(options: unknown): RedisLockModuleOptions {
  if (typeof options !== 'object' || options === null || !('isGlobal' in options)) {
    return options as RedisLockModuleOptions;
  }
  const { isGlobal: _ignored, ...rest } = options as { isGlobal?: unknown };
  return rest as RedisLockModuleOptions;
}
