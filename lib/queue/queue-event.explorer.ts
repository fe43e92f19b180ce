import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { Observable, Subscription } from 'rxjs';
import { QueueError } from '../errors/queue.error';
import { wrappersServedBy } from '../discovery/served-wrappers';
import type {
  QueueEvent,
  QueueEventsOptions,
  QueueEventType,
} from './interfaces/queue-event.interface';
import { QUEUE_EVENT_METADATA, type QueueEventMetadata } from './on-queue-event.decorator';
import { QueueService } from './queue.service';

/** What the explorer uses of `QueueService`. */
interface QueueEventSource {
  events(queue: string, options?: QueueEventsOptions): Observable<QueueEvent>;
}

/** One decorated method and the event types it wants. */
interface EventHandler {
  readonly name: string;
  readonly types: ReadonlySet<QueueEventType>;
  readonly call: (event: QueueEvent) => unknown;
}

/**
 * Finds `@OnQueueEvent` methods on the providers and controllers its `RedisLockModule` serves
 * (`wrappersServedBy`) when the application bootstraps, and subscribes once per queue (from
 * `'now'`) through that module's `QueueService.events`: one reader per queue and process, whatever
 * the number of methods. Unsubscribes on shutdown.
 */
@Injectable()
export class QueueEventExplorer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('QueueService');
  private readonly handlers = new Map<string, EventHandler[]>();
  private readonly subscriptions: Subscription[] = [];
  private readonly registered = new WeakMap<object, Set<string>>();

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    @Inject(QueueService) private readonly queues: QueueEventSource,
  ) {}

  onApplicationBootstrap(): void {
    for (const wrapper of wrappersServedBy(this.discovery, QueueEventExplorer, this)) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      if (!instance || typeof instance !== 'object') continue;
      const prototype = Object.getPrototypeOf(instance) as object | null;
      if (!prototype) continue;
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const registrations = Reflect.getMetadata(
          QUEUE_EVENT_METADATA,
          (prototype as Record<string, object>)[method],
        ) as QueueEventMetadata[] | undefined;
        if (!registrations) continue;
        if (!wrapper.isDependencyTreeStatic()) {
          this.logger.warn(
            `@OnQueueEvent on ${wrapper.name}.${method} ignored: the provider is request-scoped`,
          );
          continue;
        }
        this.register(instance, `${wrapper.name}.${method}`, method, registrations);
      }
    }
    for (const [queue, handlers] of this.handlers) {
      let events: Observable<QueueEvent>;
      try {
        events = this.queues.events(queue, { from: 'now' });
      } catch (err) {
        throw new QueueError(
          `@OnQueueEvent('${queue}') on ${handlers.map((h) => h.name).join(', ')}: ${(err as Error).message}`,
        );
      }
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
    for (const { queue, types } of registrations) {
      const list = this.handlers.get(queue) ?? [];
      list.push({ name, types: new Set(types), call });
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
