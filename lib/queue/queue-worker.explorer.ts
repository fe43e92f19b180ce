import { Injectable, type OnApplicationBootstrap } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { RedactingLogger } from '../redaction/redacting-logger';
import { decoratedMethods } from '../discovery/served-wrappers';
import { RedisLockConnection } from '../redis/redis-connection';
import type { LeasedTask } from './interfaces/task.interface';
import type { QueueWorkerHandle } from './interfaces/queue-options.interface';
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
    private readonly connection: RedisLockConnection,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const methods = decoratedMethods<QueueWorkerMetadata>(
      this.discovery,
      this.scanner,
      QueueWorkerExplorer,
      this,
      QUEUE_WORKER_METADATA,
      '@QueueWorker',
      this.logger,
    );
    const started: QueueWorkerHandle[] = [];
    try {
      for (const { instance, method, registrations } of methods) {
        this.start(instance, method, registrations, started);
      }
    } catch (err) {
      // A registration refused (two handlers of one name, loop options that differ): the start
      // fails, and Nest calls no shutdown hook after a failed start. The workers started so far
      // would go on running tasks in an application that did not start, and the connections
      // would keep the process alive: both are closed here.
      await Promise.allSettled(started.map((handle) => handle.close()));
      await this.connection.close();
      throw err;
    }
  }

  private start(
    instance: Record<string, unknown>,
    method: string,
    registrations: QueueWorkerMetadata[],
    started: QueueWorkerHandle[],
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
      const handle = this.queues.process(
        queue,
        handler.length === 1
          ? (task: LeasedTask) => handler.call(instance, task)
          : (task: LeasedTask, signal: AbortSignal) => handler.call(instance, task, signal),
        options,
      );
      started.push(handle);
    }
  }
}
