import type { INestApplicationContext } from '@nestjs/common';
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  StackContextManager,
  TracerProvider,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace';
import { LockService, QueueService } from '../../lib';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { exited, spawnTs } from '../support/child';
import {
  createLockApp,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';

interface ChildSpan {
  name: string;
  kind: SpanKind;
  traceId: string;
  parent?: { traceId: string; spanId: string };
  links: { traceId: string; spanId: string }[];
  attributes: Record<string, unknown>;
}

describe('OpenTelemetry spans (in-memory exporter)', () => {
  const prefix = uniquePrefix('tracing');
  const redis = redisClient();
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  const storedPayload = (queue: string, id: string) =>
    redis.hget(queueRedisKeys(prefix, queue).payload, id);
  let untraced: INestApplicationContext;
  let app: INestApplicationContext;

  beforeAll(async () => {
    // Made before any SDK is registered: it looks its tracer up once and never traces.
    untraced = await createLockApp({ keyPrefix: prefix });
    await untraced.get(LockService).tryAcquire('warm-up');
    await untraced.get(QueueService).enqueue('warm-up', 'w');
    trace.setGlobalTracerProvider(provider);
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    // Synchronous context is enough: enqueue reads the active span before its first await.
    context.setGlobalContextManager(new StackContextManager().enable());
    app = await createLockApp({ keyPrefix: prefix });
  });
  afterAll(async () => {
    await Promise.all([app.close(), untraced.close()]);
    await provider.shutdown();
    trace.disable();
    propagation.disable();
    context.disable();
    redis.disconnect();
  });
  beforeEach(() => exporter.reset());

  const spans = (name: string): ReadableSpan[] =>
    exporter.getFinishedSpans().filter((s) => s.name === name);

  it('untraced: no span, and the task record holds the payload only (no extra bytes)', async () => {
    const queues = untraced.get(QueueService);
    await queues.enqueue('plain', 'p1', { payload: { n: 1 } });
    expect(await storedPayload('plain', 'p1')).toBe('{"n":1}');
    const [task] = await queues.claim('plain');
    expect(task.payload).toEqual({ n: 1 });
    expect(task.traceparent).toBeUndefined();
    await (await untraced.get(LockService).acquire('quiet')).release();
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  it('redis_lock.acquire: lock label, outcome, waited ms and fence', async () => {
    const locks = app.get(LockService);
    const held = await locks.acquire('stock:1', { label: 'stock' });
    expect(await locks.tryAcquire('stock:1', { label: 'stock', waitMs: 10 })).toBeNull();
    await held.release();
    const [got, missed] = spans('redis_lock.acquire');
    expect(spans('redis_lock.acquire')).toHaveLength(2);
    expect(got.attributes).toEqual({
      'redis_lock.lock': 'stock',
      'redis_lock.outcome': 'acquired',
      'redis_lock.waited_ms': expect.any(Number),
      'redis_lock.fence': held.fence,
    });
    expect(held.fence).toBeGreaterThan(0);
    expect(missed.attributes).toEqual({
      'redis_lock.lock': 'stock',
      'redis_lock.outcome': 'timeout',
      'redis_lock.waited_ms': expect.any(Number),
    });
    expect(missed.status.code).toBe(0); // contention is not an error
  });

  it('enqueue (producer) in this process, process (consumer) in another: one trace', async () => {
    const queue = 'traced';
    const tracer = provider.getTracer('test');
    const request = tracer.startSpan('request');
    await context.with(trace.setSpan(ROOT_CONTEXT, request), () =>
      app.get(QueueService).enqueue(queue, 'job-1', { payload: { sku: 'a' } }),
    );
    request.end();
    const [producer] = spans(`enqueue ${queue}`);
    expect(producer.kind).toBe(SpanKind.PRODUCER);
    expect(producer.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(producer.attributes).toEqual({
      'messaging.system': 'redis-lock',
      'messaging.destination.name': queue,
      'messaging.operation.name': 'enqueue',
      'messaging.operation.type': 'send',
      'messaging.message.id': 'job-1',
    });
    const { traceId, spanId } = producer.spanContext();
    expect(await storedPayload(queue, 'job-1')).toBe(
      `\u000100-${traceId}-${spanId}-01\n{"sku":"a"}`,
    );

    const child = spawnTs('test/fixtures/traced-worker-child.ts', [], {
      REDIS_URL: testRedisUrl(),
      PREFIX: prefix,
      QUEUE: queue,
    });
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    expect(await exited(child)).toBe(0);
    const lines = out.split('\n');
    expect(lines).toContain('payload {"sku":"a"}');
    const childSpans = lines
      .filter((l) => l.startsWith('span '))
      .map((l) => JSON.parse(l.slice(5)) as ChildSpan);
    expect(childSpans).toEqual([
      {
        name: `process ${queue}`,
        kind: SpanKind.CONSUMER,
        traceId,
        parent: { traceId, spanId },
        links: [{ traceId, spanId }],
        attributes: {
          'messaging.system': 'redis-lock',
          'messaging.destination.name': queue,
          'messaging.operation.name': 'process',
          'messaging.operation.type': 'process',
          'messaging.message.id': 'job-1',
          'redis_lock.task.attempt': 1,
        },
      },
    ]);
  }, 90_000); // a child process starts (ts-node): slow on a loaded machine

  it('a handler that throws ends its process span with status error; attempts are counted', async () => {
    const queues = app.get(QueueService);
    const worker = queues.process(
      'flaky',
      async (task) => {
        if (task.attempt === 1) throw new Error('first attempt fails');
      },
      { maxAttempts: 2, backoffMs: 1 },
    );
    await queues.enqueue('flaky', 'f1');
    await waitFor('two process spans', () => spans('process flaky').length === 2);
    await worker.close();
    const [first, second] = spans('process flaky');
    expect([first.status.code, second.status.code]).toEqual([SpanStatusCode.ERROR, 0]);
    expect(first.status.message).toBe('first attempt fails');
    expect([first, second].map((s) => s.attributes['redis_lock.task.attempt'])).toEqual([1, 2]);
    const producer = spans('enqueue flaky')[0].spanContext();
    for (const s of [first, second]) expect(s.parentSpanContext?.spanId).toBe(producer.spanId);
  });

  it('a batch enqueue is one producer span; a replace without payload keeps the stored payload', async () => {
    const queues = app.get(QueueService);
    await queues.enqueue('batch', ['b1', 'b2', 'b3'], { payload: 7 });
    const [producer] = spans('enqueue batch');
    expect(producer.attributes['messaging.batch.message_count']).toBe(3);
    expect(producer.attributes['messaging.message.id']).toBeUndefined();
    const first = await storedPayload('batch', 'b1');
    await queues.enqueue('batch', 'b1', { replace: true, delayMs: 1 });
    expect(await storedPayload('batch', 'b1')).toBe(first);
    expect(spans('enqueue batch')).toHaveLength(2);
  });
});
