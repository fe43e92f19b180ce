import type { Attributes, Span, Tracer } from '@opentelemetry/api';
import type { AcquireOutcome } from './metrics';
import { libraryTracer, otelApi } from './otel';
import { redactCredentials } from '../redaction/redact-credentials';

/** `messaging.system` of the queue spans (OpenTelemetry messaging semantic conventions). */
export const MESSAGING_SYSTEM = 'redis-lock';

/**
 * The library's tracer, looked up on first use (`null`: none, so spans are skipped with one check).
 * Register the SDK's tracer provider before the Nest application is created.
 */
class LibraryTracer {
  private tracer?: Tracer | null;

  protected get(): Tracer | undefined {
    if (this.tracer === undefined) this.tracer = libraryTracer() ?? null;
    return this.tracer ?? undefined;
  }
}

/** Marks a span failed with `err`, without its credentials (`redactCredentials`). */
function failed(span: Span, failure: unknown): void {
  const api = otelApi!;
  const err = redactCredentials(failure);
  if (err instanceof Error) span.recordException(err);
  span.setStatus({ code: api.SpanStatusCode.ERROR, message: (err as Error)?.message });
}

/** The `redis_lock.acquire` span of lock acquisitions (see docs/observability.md). */
export class LockTracing extends LibraryTracer {
  /** Starts the span of an acquisition of the lock labelled `label`; `undefined` when not traced. */
  start(label: string): Span | undefined {
    return this.get()?.startSpan('redis_lock.acquire', {
      attributes: { 'redis_lock.lock': label },
    });
  }

  /** Ends an acquisition's span: its outcome, how long it waited and the fence it got. */
  end(span: Span, outcome: AcquireOutcome, waitedMs: number, fence?: number, err?: unknown): void {
    span.setAttribute('redis_lock.outcome', outcome);
    span.setAttribute('redis_lock.waited_ms', waitedMs);
    if (fence) span.setAttribute('redis_lock.fence', fence);
    // A timeout is expected contention, not an error of the span.
    if (outcome === 'error') failed(span, err);
    span.end();
  }
}

/** The `enqueue` (producer) and `process` (consumer) spans of queues. */
export class QueueTracing extends LibraryTracer {
  /**
   * Runs `send` (the enqueue round trip) in a PRODUCER span `enqueue <queue>`, passing it the
   * span's W3C `traceparent` to store with the tasks; untraced, `send` gets `undefined`.
   */
  async enqueue<T>(
    queue: string,
    ids: readonly string[],
    send: (traceparent: string | undefined) => Promise<T>,
  ): Promise<T> {
    const tracer = this.get();
    if (!tracer) return send(undefined);
    const api = otelApi!;
    const span = tracer.startSpan(`enqueue ${queue}`, {
      kind: api.SpanKind.PRODUCER,
      attributes: messaging(queue, 'enqueue', 'send', ids),
    });
    const carrier: Record<string, string> = {};
    api.propagation.inject(api.trace.setSpan(api.context.active(), span), carrier);
    try {
      return await send(carrier.traceparent);
    } catch (err) {
      failed(span, err);
      throw err;
    } finally {
      span.end();
    }
  }

  /**
   * Runs a task's handler in a CONSUMER span `process <queue>`: a child of the producer's span
   * (from the task's `traceparent`), linked to it as well; the handler runs with it active.
   * Untraced, it is the handler's own call (what it returns or throws): no promise of its own
   * per task.
   */
  process<T>(
    queue: string,
    task: { id: string; attempt: number; traceparent?: string },
    run: () => T | Promise<T>,
  ): T | Promise<T> {
    const tracer = this.get();
    return tracer ? this.traced(tracer, queue, task, run) : run();
  }

  private async traced<T>(
    tracer: Tracer,
    queue: string,
    task: { id: string; attempt: number; traceparent?: string },
    run: () => T | Promise<T>,
  ): Promise<T> {
    const api = otelApi!;
    const parent =
      task.traceparent === undefined
        ? api.context.active()
        : api.propagation.extract(api.ROOT_CONTEXT, { traceparent: task.traceparent });
    const producer = task.traceparent === undefined ? undefined : api.trace.getSpanContext(parent);
    const span = tracer.startSpan(
      `process ${queue}`,
      {
        kind: api.SpanKind.CONSUMER,
        attributes: {
          ...messaging(queue, 'process', 'process', [task.id]),
          'redis_lock.task.attempt': task.attempt,
        },
        links: producer ? [{ context: producer }] : [],
      },
      parent,
    );
    try {
      return await api.context.with(api.trace.setSpan(parent, span), run);
    } catch (err) {
      failed(span, err);
      throw err;
    } finally {
      span.end();
    }
  }
}

/** Messaging semantic-convention attributes of a queue span. */
function messaging(queue: string, name: string, type: string, ids: readonly string[]): Attributes {
  return {
    'messaging.system': MESSAGING_SYSTEM,
    'messaging.destination.name': queue,
    'messaging.operation.name': name,
    'messaging.operation.type': type,
    ...(ids.length === 1
      ? { 'messaging.message.id': ids[0] }
      : { 'messaging.batch.message_count': ids.length }),
  };
}
