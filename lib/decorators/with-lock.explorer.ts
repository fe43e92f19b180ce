import { Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { wrappersServedBy } from '../discovery/served-wrappers';
import { LockService } from '../lock/lock.service';
import { RateLimiterService } from '../rate-limit/rate-limiter.service';
import { SemaphoreService } from '../semaphore/semaphore.service';
import { WaitingRoomService } from '../waiting-room/waiting-room.service';
import { rateLimiterServices } from './rate-limit.decorator';
import { waitingRoomServices } from './requires-pass.decorator';
import { semaphoreServices } from './with-semaphore.decorator';
import { lockServiceRegistry, type LockServiceSource } from './lock-service.registry';
import { WITH_LOCK_METHODS } from './with-lock.constants';

/**
 * @internal Tells every `@WithLock` method which `LockService` to use, so that decorated classes
 * need not inject it. At bootstrap it goes over the application's providers and controllers and
 * binds each instance with `@WithLock` methods that its `RedisLockModule` serves (see
 * `wrappersServedBy`) to that module's `LockService`.
 */
@Injectable()
export class WithLockExplorer implements LockServiceSource, OnModuleInit, OnApplicationShutdown {
  private initialized = false;

  constructor(
    private readonly discovery: DiscoveryService,
    readonly lockService: LockService,
    semaphoreService: SemaphoreService,
    rateLimiter: RateLimiterService,
    waitingRoom: WaitingRoomService,
  ) {
    lockServiceRegistry.join(this);
    // @WithSemaphore, @RateLimit and @RequiresPass find their module's services through the
    // LockService beside it.
    semaphoreServices.set(lockService, semaphoreService);
    rateLimiterServices.set(lockService, rateLimiter);
    waitingRoomServices.set(lockService, waitingRoom);
  }

  get bound(): boolean {
    return this.initialized;
  }

  onModuleInit(): void {
    this.bindInstances();
    this.initialized = true;
  }

  onApplicationShutdown(): void {
    lockServiceRegistry.leave(this);
  }

  bindInstances(): void {
    for (const w of wrappersServedBy(this.discovery, WithLockExplorer, this)) {
      const target = decoratedTarget(w);
      if (target?.instance) lockServiceRegistry.bindInstance(target.instance, this.lockService);
      if (target?.type) lockServiceRegistry.bindClass(target.type, this.lockService);
      // A transient provider's instances made at bootstrap (one per consumer) belong to this
      // module: bound one by one, they need not the class binding another module may share.
      if (target?.type && w.isTransient) {
        for (const t of w.getStaticTransientInstances()) {
          if (t?.instance) lockServiceRegistry.bindInstance(t.instance as object, this.lockService);
        }
      }
    }
  }
}

/** The instance (static scope) or class (request/transient scope) of a wrapper to bind, if any. */
function decoratedTarget(w: InstanceWrapper): { instance?: object; type?: object } | undefined {
  const type = typeof w.metatype === 'function' && !w.inject ? w.metatype : undefined;
  const staticScope = w.isDependencyTreeStatic() && !w.isTransient;
  const instance: unknown = staticScope ? w.instance : undefined;
  if (instance !== null && typeof instance === 'object') {
    const ctor = (instance as object).constructor;
    if (!hasWithLock(instance) && !hasWithLock(ctor)) return undefined;
    // The class itself too: its static @WithLock methods run with the class as `this`.
    return { instance, type: ctor };
  }
  if (type && (hasWithLock(type.prototype) || hasWithLock(type))) return { type };
  return undefined;
}

function hasWithLock(target: unknown): boolean {
  return (
    target !== null &&
    (typeof target === 'object' || typeof target === 'function') &&
    Reflect.hasMetadata(WITH_LOCK_METHODS, target as object)
  );
}
