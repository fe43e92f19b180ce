import { RedisLockError } from '../errors/redis-lock.error';
import type { LockService } from '../lock/lock.service';

/** @internal One running `RedisLockModule`, as the registry sees it (its `WithLockExplorer`). */
export interface LockServiceSource {
  readonly lockService: LockService;
  /** Binds the decorated instances of its application that it serves (see `WithLockExplorer`). */
  bindInstances(): void;
  /** Whether `bindInstances` has run after the application was fully instantiated. */
  readonly bound: boolean;
}

/**
 * @internal Which `LockService` a `@WithLock` method uses, per instance. Explorers bind the
 * instances Nest manages at bootstrap; a call on any other `this` falls back to the class's
 * binding, then to the only running `LockService` of the process. A class bound by two running
 * modules (provided in two features with their own `RedisLockModule`, or in two applications of one
 * process) has no class binding to fall back to: such a call fails rather than lock elsewhere.
 */
class LockServiceRegistry {
  private readonly sources = new Set<LockServiceSource>();
  private readonly instances = new WeakMap<object, LockService>();
  private readonly classes = new WeakMap<object, Set<LockService>>();

  join(source: LockServiceSource): void {
    this.sources.add(source);
  }

  leave(source: LockServiceSource): void {
    this.sources.delete(source);
  }

  /** Binds an instance (or, for static methods, a class) Nest manages. */
  bindInstance(instance: object, service: LockService): void {
    this.instances.set(instance, service);
  }

  /** Binds the instances of a class Nest creates per request or per consumer. */
  bindClass(type: object, service: LockService): void {
    const bound = this.classes.get(type) ?? new Set<LockService>();
    // Forget the modules that have shut down, so that the set stays as small as the live ones.
    for (const old of bound) if (!this.isLive(old)) bound.delete(old);
    bound.add(service);
    this.classes.set(type, bound);
  }

  /**
   * The `LockService` serving `self`, or `undefined` when none can be told.
   * @throws RedisLockError naming the class when `self` has no binding of its own and its class is
   * bound by several running modules
   */
  find(self: unknown): LockService | undefined {
    if (self !== null && (typeof self === 'object' || typeof self === 'function')) {
      let found = this.instances.get(self);
      if (!found) {
        // A call before the explorers ran (e.g. from another provider's onModuleInit).
        for (const source of this.sources) if (!source.bound) source.bindInstances();
        found = this.instances.get(self);
      }
      if (found) return found;
      const type = typeof self === 'function' ? self : self.constructor;
      let live = 0;
      for (const service of (type && this.classes.get(type)) || []) {
        if (this.isLive(service)) {
          found = service;
          live++;
        }
      }
      if (live === 1) return found;
      if (live > 1) {
        const name = (type as { name?: string }).name || 'anonymous class';
        throw new RedisLockError(
          `${name} is provided under ${live} running RedisLockModules, and this instance ` +
            'is not one Nest created at bootstrap (request-scoped, resolved with ModuleRef.resolve, ' +
            'created with new, or a static method): which one to lock with cannot be told — ' +
            `provide ${name} under one RedisLockModule only, or make it a singleton`,
        );
      }
    }
    if (this.sources.size === 1) return [...this.sources][0].lockService;
    return undefined;
  }

  /** How many `RedisLockModule`s are running in this process. */
  get size(): number {
    return this.sources.size;
  }

  private isLive(service: LockService): boolean {
    for (const source of this.sources) if (source.lockService === service) return true;
    return false;
  }
}

/** @internal */
export const lockServiceRegistry = new LockServiceRegistry();

/**
 * @internal The service of `services` (a `SemaphoreService`, a `RateLimiterService`, …) of the
 * module that serves `self`, found through its `LockService`.
 * @throws RedisLockError naming the decorator and the method when no module serves it
 */
export function moduleServiceOf<S>(
  services: WeakMap<LockService, S>,
  decorator: string,
  serviceName: string,
  where: string,
  self: unknown,
): S {
  const locks = lockServiceRegistry.find(self);
  const found = locks && services.get(locks);
  if (found) return found;
  throw new RedisLockError(
    `${decorator} on ${where}: no ${serviceName} — import RedisLockModule.forRoot() in the ` +
      'module that provides this class',
  );
}
