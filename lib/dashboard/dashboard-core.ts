import { Injectable, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { RedactingLogger } from '../redaction/redacting-logger';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { RedisLockEvents } from '../events/redis-lock-events';
import { LockService } from '../lock/lock.service';
import { QueueService } from '../queue/queue.service';
import { RedisLockConnection } from '../redis/redis-connection';

/** The lock module's services the dashboard reads. */
interface CoreServices {
  connection: RedisLockConnection;
  locks: LockService;
  queues: QueueService;
  events: RedisLockEvents;
}

/**
 * The services of `RedisLockModule` the dashboard uses, found wherever that module was imported:
 * global or not, beside the dashboard or inside a feature module that does not export it. They
 * are looked up in the whole application (`ModuleRef.get` with `strict: false`) when the first
 * dashboard provider starts (`onModuleInit`: every provider of the app exists by then), so the
 * dashboard module needs no `imports` of its own and Nest's injector never has to see them.
 */
@Injectable()
export class DashboardCore implements OnModuleInit {
  private found?: CoreServices;

  constructor(private readonly moduleRef: ModuleRef) {}

  /** Fails the start when there is no `RedisLockModule` (see `services`). */
  onModuleInit(): void {
    this.services();
  }

  get connection(): RedisLockConnection {
    return this.services().connection;
  }

  get locks(): LockService {
    return this.services().locks;
  }

  get queues(): QueueService {
    return this.services().queues;
  }

  get events(): RedisLockEvents {
    return this.services().events;
  }

  /**
   * @throws RedisLockOptionsError when the application imports no `RedisLockModule`
   */
  private services(): CoreServices {
    if (this.found) return this.found;
    const connections = this.find(RedisLockConnection);
    if (connections.length > 1) {
      // Each `forRoot` with other options is a module instance of its own (another Redis, another
      // prefix); Nest's own lookup (the last one) decides, and the page says which it is.
      new RedactingLogger('RedisLockDashboard').warn(
        `${connections.length} RedisLockModule instances in this application: the dashboard ` +
          `shows the one of instanceId '${connections.at(-1)!.options.instanceId}'`,
      );
    }
    this.found = {
      connection: connections.at(-1)!,
      locks: this.find(LockService).at(-1)!,
      queues: this.find(QueueService).at(-1)!,
      events: this.find(RedisLockEvents).at(-1)!,
    };
    return this.found;
  }

  /** Every instance of `type` in the application (Nest's module order); never empty. */
  private find<T>(type: new (...args: never[]) => T): T[] {
    let found: T[] = [];
    try {
      found = this.moduleRef.get(type, { strict: false, each: true });
    } catch {
      // UnknownElementException: no module of the app provides it.
    }
    if (found.length === 0) {
      throw new RedisLockOptionsError(
        'imports',
        `RedisLockDashboardModule without RedisLockModule (no ${type.name})`,
        'RedisLockModule.forRoot({ redis }) or RedisLockModule.forRootAsync(...) imported too, ' +
          'in any module of the application (isGlobal is not needed)',
      );
    }
    return found;
  }
}
