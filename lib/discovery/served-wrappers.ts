import type { DiscoveryService } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
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
