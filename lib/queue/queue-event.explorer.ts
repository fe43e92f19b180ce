import {
  Injectable,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { Observable, Subscription } from 'rxjs';
import { RedactingLogger } from '../redaction/redacting-logger';
import { QueueError } from '../errors/queue.error';
import { decoratedMethods } from '../discovery/served-wrappers';
import { RedisLockConnection } from '../redis/redis-connection';
import type { QueueEvent, QueueEventType } from './interfaces/queue-event.interface';
import { QUEUE_EVENT_METADATA, type QueueEventMetadata } from './on-queue-event.decorator';
import { QueueService } from './queue.service';

/** One decorated method and the event types it wants. */
interface EventHandler {
  readonly name: string;
  readonly types: ReadonlySet<QueueEventType>;
  readonly call: (event: QueueEvent) => unknown;
}

/**
 * Finds `@OnQueueEvent` methods on the providers and controllers its `RedisLockModule` serves
 * (`decoratedMethods`) when the module initialises, and subscribes once per queue (from `'now'`)
 * when the application bootstraps, through that module's `QueueService.events`: one reader per
 * queue and process, whatever the number of methods. Unsubscribes on shutdown.
 */
@Injectable()
export class QueueEventExplorer
  implements OnModuleInit, OnApplicationBootstrap, OnApplicationShutdown
{
  private readonly logger = new RedactingLogger('QueueService');
  private readonly handlers = new Map<string, EventHandler[]>();
  private readonly subscriptions: Subscription[] = [];
  /** The queues' events, from `onModuleInit` until they are subscribed at bootstrap. */
  private readonly streams: { events: Observable<QueueEvent>; handlers: EventHandler[] }[] = [];
  private readonly registered = new WeakMap<object, Set<string>>();

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly queues: QueueService,
    private readonly connection: RedisLockConnection,
  ) {}

  /**
   * Finds the methods and checks that their queues' events are on. Done before the application
   * bootstraps: a start that fails here (`queue.eventsMaxLen: 0`) fails before any `@QueueWorker`
   * runs, and Nest calls no shutdown hook after a failed start, so the connections the module
   * opened are closed here.
   */
  async onModuleInit(): Promise<void> {
    const methods = decoratedMethods<QueueEventMetadata>(
      this.discovery,
      this.scanner,
      QueueEventExplorer,
      this,
      QUEUE_EVENT_METADATA,
      '@OnQueueEvent',
      this.logger,
    );
    for (const { name, instance, method, registrations } of methods) {
      this.register(instance, name, method, registrations);
    }
    for (const [queue, handlers] of this.handlers) {
      try {
        // Reads nothing until subscribed (at bootstrap); throws now when events are off.
        this.streams.push({ events: this.queues.events(queue, { from: 'now' }), handlers });
      } catch (err) {
        await this.connection.close();
        throw new QueueError(
          `@OnQueueEvent('${queue}') on ${handlers.map((h) => h.name).join(', ')}: ${(err as Error).message}`,
        );
      }
    }
  }

  /** Subscribes once per queue, from `'now'`. */
  onApplicationBootstrap(): void {
    for (const { events, handlers } of this.streams.splice(0)) {
      this.subscriptions.push(
        events.subscribe((event) => {
          for (const handler of handlers) {
            if (handler.types.has(event.type)) this.call(handler, event);
          }
        }),
      );
    }
  }

  onApplicationShutdown(): void {
    for (const subscription of this.subscriptions.splice(0)) subscription.unsubscribe();
    this.handlers.clear();
  }

  private register(
    instance: Record<string, unknown>,
    name: string,
    method: string,
    registrations: QueueEventMetadata[],
  ): void {
    // A provider listed in several modules is one instance: register its methods once.
    const done = this.registered.get(instance) ?? new Set<string>();
    if (done.has(method)) return;
    done.add(method);
    this.registered.set(instance, done);
    const fn = instance[method] as (event: QueueEvent) => unknown;
    const call = (event: QueueEvent) => fn.call(instance, event);
    // Several decorators on one method add up: one handler per queue with the union of their
    // types, so that an event both name calls the method once.
    const byQueue = new Map<string, Set<QueueEventType>>();
    for (const { queue, types } of registrations) {
      const union = byQueue.get(queue) ?? new Set();
      for (const type of types) union.add(type);
      byQueue.set(queue, union);
    }
    for (const [queue, types] of byQueue) {
      const list = this.handlers.get(queue) ?? [];
      list.push({ name, types, call });
      this.handlers.set(queue, list);
    }
  }

  private call(handler: EventHandler, event: QueueEvent): void {
    const failed = (err: unknown) => {
      const what = event.taskId === undefined ? '' : ` of task '${event.taskId}'`;
      this.logger.error(
        `@OnQueueEvent ${handler.name} failed on '${event.type}'${what} in queue '${event.queue}' (event ${event.eventId}): ${err instanceof Error ? err.message : String(err)}`,
        err instanceof Error ? err.stack : undefined,
      );
    };
    try {
      const returned = handler.call(event);
      if (returned instanceof Promise) returned.catch(failed);
    } catch (err) {
      failed(err);
    }
  }
}
