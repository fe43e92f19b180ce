import { Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import type { Module } from '@nestjs/core/injector/module';
import { LockService } from '../lock/lock.service';
import { lockServiceRegistry, type LockServiceSource } from './lock-service.registry';
import { WITH_LOCK_METHODS } from './with-lock.constants';

/**
 * @internal Tells every `@WithLock` method which `LockService` to use, so that decorated classes
 * need not inject it. At bootstrap it goes over the application's providers and controllers and
 * binds each instance with `@WithLock` methods to the `LockService` of the nearest
 * `RedisLockModule` in the import graph of the instance's module (a global module is imported by
 * every module), or of the application's only one. Each `RedisLockModule` has its own explorer;
 * they all pick the same module for an instance, so each binds only the instances it serves.
 */
@Injectable()
export class WithLockExplorer implements LockServiceSource, OnModuleInit, OnApplicationShutdown {
  private initialized = false;

  constructor(
    private readonly discovery: DiscoveryService,
    readonly lockService: LockService,
  ) {
    lockServiceRegistry.join(this);
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
    const wrappers = [...this.discovery.getProviders(), ...this.discovery.getControllers()];
    const lockModules = new Set<Module>();
    let own: Module | undefined;
    for (const w of wrappers) {
      if (w.metatype !== WithLockExplorer || !w.host) continue;
      lockModules.add(w.host);
      if (w.instance === this) own = w.host;
    }
    if (!own) return;
    for (const w of wrappers) {
      const target = decoratedTarget(w);
      if (!target || nearestLockModule(w.host, lockModules) !== own) continue;
      if (target.instance) lockServiceRegistry.bindInstance(target.instance, this.lockService);
      if (target.type) lockServiceRegistry.bindClass(target.type, this.lockService);
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

/**
 * The `RedisLockModule` closest to `host` following imports (breadth first); the only one of
 * the application when none is reachable; `undefined` when that is ambiguous.
 */
function nearestLockModule(host: Module | undefined, lockModules: Set<Module>): Module | undefined {
  if (host) {
    const seen = new Set<Module>([host]);
    let level = [host];
    while (level.length > 0) {
      for (const m of level) if (lockModules.has(m)) return m;
      const next: Module[] = [];
      for (const m of level) {
        for (const imported of m.imports) {
          if (imported && !seen.has(imported)) {
            seen.add(imported);
            next.push(imported);
          }
        }
      }
      level = next;
    }
  }
  return lockModules.size === 1 ? [...lockModules][0] : undefined;
}
