import { Injectable, type OnApplicationBootstrap } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { RedactingLogger } from '../redaction/redacting-logger';
import { decoratedMethods } from '../discovery/served-wrappers';
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
  private readonly logger = new RedactingLogger('QueueService');
  private readonly started = new WeakMap<object, Set<string>>();

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly queues: QueueService,
  ) {}

  onApplicationBootstrap(): void {
    const methods = decoratedMethods<QueueWorkerMetadata>(
      this.discovery,
      this.scanner,
      QueueWorkerExplorer,
      this,
      QUEUE_WORKER_METADATA,
      '@QueueWorker',
      this.logger,
    );
    for (const { instance, method, registrations } of methods) {
      this.start(instance, method, registrations);
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
