import { Injectable } from '@nestjs/common';
import { errorText } from '../errors/error-text';
import { RedactingLogger } from '../redaction/redacting-logger';
import type { RedisLockEventMap, RedisLockEventName } from './redis-lock-event-map';

/**
 * A listener of event `E`. It may be async: a promise it returns that rejects is logged as a
 * throw is. (The return type stays `void`, which takes an async function too, so that a listener
 * such as `(e) => seen.push(e)` still compiles.)
 */
export type RedisLockListener<E extends RedisLockEventName> = (
  payload: RedisLockEventMap[E],
) => void;

/**
 * Typed in-process events of the module (task outcomes, worker errors, lock losses), for code
 * that reacts to them: metrics, alerts, audit. Listeners run synchronously in the emitting
 * process; one that throws, or returns a promise that rejects, is logged and does not affect
 * the others or the emitter. Emitting with no listener costs one map lookup.
 * @example
 * constructor(events: RedisLockEvents) {
 *   events.on('task.dead', ({ queue, id, error }) => alert(`${queue}/${id} died: ${error}`));
 * }
 * // @nestjs/event-emitter users forward everything in one line:
 * events.onAny((name, payload) => eventEmitter.emit(name, payload));
 */
@Injectable()
export class RedisLockEvents {
  private readonly logger = new RedactingLogger('RedisLockEvents');
  private readonly listeners = new Map<string, Set<(payload: never) => void>>();
  private readonly anyListeners = new Set<
    (name: RedisLockEventName, payload: RedisLockEventMap[RedisLockEventName]) => void
  >();

  /**
   * Calls `listener` on every `event` until the returned function is called.
   * @returns unsubscribe
   */
  on<E extends RedisLockEventName>(event: E, listener: RedisLockListener<E>): () => void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    const entry = listener as (payload: never) => void;
    set.add(entry);
    return () => {
      set.delete(entry);
      if (set.size === 0 && this.listeners.get(event) === set) this.listeners.delete(event);
    };
  }

  /**
   * Calls `listener` on the next `event` only.
   * @returns unsubscribe (before it fired)
   */
  once<E extends RedisLockEventName>(event: E, listener: RedisLockListener<E>): () => void {
    const off = this.on(event, (payload) => {
      off();
      return listener(payload);
    });
    return off;
  }

  /**
   * Calls `listener` with the name and payload of every event (a bridge to another bus).
   * @returns unsubscribe
   */
  onAny(
    listener: <E extends RedisLockEventName>(name: E, payload: RedisLockEventMap[E]) => void,
  ): () => void {
    const entry = listener as (
      name: RedisLockEventName,
      payload: RedisLockEventMap[RedisLockEventName],
    ) => void;
    this.anyListeners.add(entry);
    return () => void this.anyListeners.delete(entry);
  }

  /** Whether anything listens to `event` (emitters skip building payloads when not). */
  hasListeners(event: RedisLockEventName): boolean {
    return this.listeners.has(event) || this.anyListeners.size > 0;
  }

  /** Calls the listeners of `event` with `payload`. */
  emit<E extends RedisLockEventName>(event: E, payload: RedisLockEventMap[E]): void {
    const set = this.listeners.get(event);
    if (set) {
      for (const listener of [...set]) this.call(event, () => listener(payload as never));
    }
    for (const listener of this.anyListeners) this.call(event, () => listener(event, payload));
  }

  private call(event: string, fn: () => unknown): void {
    try {
      const result = fn();
      // An async listener's rejection would be nobody's: under Node's default
      // `--unhandled-rejections=throw` it would end the emitting process (and its worker).
      if (isThenable(result)) result.then(undefined, (err: unknown) => this.threw(event, err));
    } catch (err) {
      this.threw(event, err);
    }
  }

  private threw(event: string, err: unknown): void {
    this.logger.error(`a listener of '${event}' threw: ${errorText(err)}`);
  }
}

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  (typeof value === 'object' || typeof value === 'function') &&
  value !== null &&
  typeof (value as { then?: unknown }).then === 'function';
