import { QueueError } from '../errors/queue.error';
import {
  QUEUE_EVENT_TYPES,
  type QueueEvent,
  type QueueEventType,
} from './interfaces/queue-event.interface';
import type { QueueName } from './interfaces/task.interface';
import { checkQueueName } from './queue-keys';

/** Metadata key under which `@OnQueueEvent` stores its registrations on a method. */
export const QUEUE_EVENT_METADATA = 'nestjs-redis-lock:queue-event';

/** One `@OnQueueEvent` registration, as stored on the method. */
export interface QueueEventMetadata {
  queue: string;
  types: readonly QueueEventType[];
}

function checkTypes(types: unknown): QueueEventType[] {
  const list = Array.isArray(types) ? (types as unknown[]) : [types];
  const expected = `an event type (one of ${QUEUE_EVENT_TYPES.join(', ')}) or a non-empty array of them`;
  if (list.length === 0) throw QueueError.invalid('type', types, expected);
  for (const t of list) {
    if (!QUEUE_EVENT_TYPES.includes(t as QueueEventType)) {
      throw QueueError.invalid('type', t, expected);
    }
  }
  return [...new Set(list as QueueEventType[])];
}

/**
 * Calls a provider (or controller) method for every event of the given type(s) on `queue`, from
 * every instance (read from the queue's event stream, docs/queue-events.md), from the application's
 * bootstrap to its shutdown. Events that happened while no instance was listening are not
 * replayed: use `QueueService.events(queue, { from })` to resume from an event id. One reader per
 * queue and process serves every decorated method. The method is called once per event, in
 * stream order, and is not awaited; what it throws (or rejects with) is logged, and the next event
 * comes all the same. The decorator only records metadata (checked here: a bad queue name or type
 * throws `QueueError`); several on one method add up.
 * @param queue the queue name, or a `TypedQueue` from `defineQueue`
 * @param type an event type, or several
 * @example
 * @Injectable()
 * export class OrderNotifier {
 *   @OnQueueEvent('orders', ['completed', 'dead'])
 *   notify(event: QueueEvent) {
 *     this.push.send(event.taskId!, event.type === 'completed' ? event.result : event.error);
 *   }
 * }
 */
export function OnQueueEvent(
  queue: QueueName,
  type: QueueEventType | readonly QueueEventType[],
): <H extends (event: QueueEvent) => unknown>(
  target: object,
  key: string | symbol,
  descriptor: TypedPropertyDescriptor<H>,
) => void {
  const registration: QueueEventMetadata = {
    queue: checkQueueName(typeof queue === 'string' ? queue : queue?.name),
    types: checkTypes(type),
  };
  return (_target, _key, descriptor) => {
    const method = descriptor.value as object;
    const existing = (Reflect.getMetadata(QUEUE_EVENT_METADATA, method) ??
      []) as QueueEventMetadata[];
    Reflect.defineMetadata(QUEUE_EVENT_METADATA, [...existing, registration], method);
  };
}
