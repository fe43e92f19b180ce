import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { wrappersServedBy } from '../discovery/served-wrappers';
import type { LeasedTask } from './interfaces/task.interface';
import type { QueueWorkerMetadata } from './queue-worker.decorator';
import { QUEUE_WORKER_METADATA } from './queue.constants';
import { QueueService } from './queue.service';

/**
 * Finds `@QueueWorker` methods on the providers and controllers its `RedisLockModule` serves (see
 * `wrappersServedBy`: each is served by one module, even when the module is imported in several
 * places) when the application bootstraps, and starts a worker for each through that module's
 * `QueueService.process`, so they drain on shutdown.
 */
@Injectable()
export class QueueWorkerExplorer implements OnApplicationBootstrap {
  private readonly logger = new Logger('QueueService');
  private readonly started = new WeakMap<object, Set<string>>();

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly queues: QueueService,
  ) {}

  onApplicationBootstrap(): void {
    for (const wrapper of wrappersServedBy(this.discovery, QueueWorkerExplorer, this)) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      if (!instance || typeof instance !== 'object') continue;
      const prototype = Object.getPrototypeOf(instance) as object | null;
      if (!prototype) continue;
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const registrations = Reflect.getMetadata(
          QUEUE_WORKER_METADATA,
          (prototype as Record<string, object>)[method],
        ) as QueueWorkerMetadata[] | undefined;
        if (!registrations) continue;
        if (!wrapper.isDependencyTreeStatic()) {
          this.logger.warn(
            `@QueueWorker on ${wrapper.name}.${method} ignored: the provider is request-scoped`,
          );
          continue;
        }
        this.start(instance, method, registrations);
      }
    }
  }

  private start(
    instance: Record<string, unknown>,
    method: string,
    registrations: QueueWorkerMetadata[],
  ): void {
    // A provider listed in several modules is one instance: start its workers once.
    const done = this.started.get(instance) ?? new Set<string>();
    if (done.has(method)) return;
    done.add(method);
    this.started.set(instance, done);
    for (const { queue, options } of registrations) {
      const handler = instance[method] as (t: LeasedTask, s?: AbortSignal) => unknown;
      // The same arity as the method: a method declared without `signal` gets none (see
      // `process`), which saves creating one per task.
      this.queues.process(
        queue,
        handler.length === 1
          ? (task: LeasedTask) => handler.call(instance, task)
          : (task: LeasedTask, signal: AbortSignal) => handler.call(instance, task, signal),
        options,
      );
    }
  }
}
