import type { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import type { RedactingLogger } from '../redaction/redacting-logger';
import type { Module } from '@nestjs/core/injector/module';

/**
 * @internal The providers and controllers that one `RedisLockModule` serves: those whose nearest
 * `RedisLockModule` in the import graph (breadth first from their own module; a global module is
 * imported by every module) is the one hosting `explorer`, or, when none is reachable, the
 * application's only one. Every `RedisLockModule` has its own explorers; since they all pick the
 * same module for a provider, each provider is served by exactly one of them (never twice when the
 * module is imported in several feature modules).
 * @param explorerType the class of `explorer`, provided once by each `RedisLockModule`
 */
export function wrappersServedBy(
  discovery: DiscoveryService,
  explorerType: abstract new (...args: never[]) => unknown,
  explorer: object,
): InstanceWrapper[] {
  const wrappers = [...discovery.getProviders(), ...discovery.getControllers()];
  const lockModules = new Set<Module>();
  let own: Module | undefined;
  for (const w of wrappers) {
    if (w.metatype !== explorerType || !w.host) continue;
    lockModules.add(w.host);
    if (w.instance === explorer) own = w.host;
  }
  if (!own) return [];
  return wrappers.filter((w) => nearestLockModule(w.host, lockModules) === own);
}

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

/** One decorated method of a provider or controller (see `decoratedMethods`). */
export interface DecoratedMethod<M> {
  /** `Provider.method`, for messages. */
  name: string;
  instance: Record<string, unknown>;
  method: string;
  /** The decorator's metadata on the method (one entry per use of the decorator). */
  registrations: M[];
}

/**
 * @internal The methods carrying `metadataKey` on the providers and controllers `explorer` serves
 * (`wrappersServedBy`). A request-scoped or transient provider's methods are skipped with a warning
 * naming `decorator`: there is no single instance to call.
 */
export function decoratedMethods<M>(
  discovery: DiscoveryService,
  scanner: MetadataScanner,
  explorerType: abstract new (...args: never[]) => unknown,
  explorer: object,
  metadataKey: string,
  decorator: string,
  logger: RedactingLogger,
): DecoratedMethod<M>[] {
  const found: DecoratedMethod<M>[] = [];
  for (const wrapper of wrappersServedBy(discovery, explorerType, explorer)) {
    const instance = wrapper.instance as Record<string, unknown> | undefined;
    if (!instance || typeof instance !== 'object') continue;
    const prototype = Object.getPrototypeOf(instance) as object | null;
    if (!prototype) continue;
    for (const method of scanner.getAllMethodNames(prototype)) {
      const registrations = Reflect.getMetadata(
        metadataKey,
        (prototype as Record<string, object>)[method],
      ) as M[] | undefined;
      if (!registrations) continue;
      const name = `${wrapper.name}.${method}`;
      if (!wrapper.isDependencyTreeStatic()) {
        logger.warn(`${decorator} on ${name} ignored: the provider is request-scoped`);
        continue;
      }
      // A transient provider's `instance` is only a placeholder made from its prototype (its
      // constructor never ran); the real instances are one per consumer, none of them "the" one.
      if (wrapper.isTransient) {
        logger.warn(`${decorator} on ${name} ignored: the provider is transient`);
        continue;
      }
      found.push({ name, instance, method, registrations });
    }
  }
  return found;
}
