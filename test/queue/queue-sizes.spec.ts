import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  Body,
  Controller,
  Module,
  Post,
  UseInterceptors,
  type INestApplication,
  type INestApplicationContext,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import request from 'supertest';
import {
  FlowError,
  LockInterceptor,
  PayloadTooLargeError,
  QueueError,
  QueueService,
  RedisLockModule,
  RedisLockOptionsError,
  type RunningTask,
} from '../../lib';
import { resolveModuleOptions } from '../../lib/options/resolve-options';
import {
  createLockApp,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';

/** The module's `queue.maxPayloadBytes` here. */
const LIMIT = 1_024;
/** `queue.queues.small.maxPayloadBytes` here. */
const SMALL = 100;
const MAX_RESULT = 512;
/** The cap of task ids (and of every other name the queue stores), in bytes. */
const MAX_ID = 512;

/**
 * A string whose JSON text is exactly `bytes` UTF-8 bytes, mostly of 2-byte characters (so that
 * counting characters instead of bytes would let it through).
 */
function sized(bytes: number): string {
  const wide = Math.floor((bytes - 2) / 2);
  return 'é'.repeat(wide) + 'x'.repeat(bytes - 2 - 2 * wide);
}

/** What `call` rejects with (fails the test when it resolves). */
async function rejection(call: () => Promise<unknown>): Promise<Error> {
  const outcome = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(outcome instanceof Error)) throw new Error('expected the call to reject');
  return outcome;
}

function expectTooLarge(err: Error, bytes: number, limit: number, option: string): void {
  expect(err).toBeInstanceOf(PayloadTooLargeError);
  expect(err).toBeInstanceOf(QueueError);
  expect(err.name).toBe('PayloadTooLargeError');
  expect(err).toMatchObject({ bytes, limit, option });
  expect(err.message).toContain(` is ${bytes} bytes (UTF-8 JSON); the limit is ${limit} bytes`);
  expect(err.message).toContain(`(${option})`);
}

describe('QueueService bounds on what one call may store', () => {
  const prefix = uniquePrefix('queue-sizes');
  let app: INestApplicationContext;
  let queues: QueueService;
  let redis: Redis;
  let n = 0;
  const fresh = () => `q${++n}`;

  /** Every key under this file's prefix with its serialized value (DUMP): any write shows. */
  async function snapshot(): Promise<Map<string, string>> {
    const keys = (await redis.keys(`${prefix}*`)).sort();
    const values = await Promise.all(keys.map((k) => redis.dumpBuffer(k)));
    return new Map(keys.map((k, i) => [k, values[i]?.toString('hex') ?? '']));
  }

  /**
   * Runs `call`, expects it to reject, and expects every key of this file (the module's prefix)
   * to be as it was before, value for value (other test files may share the server, so DBSIZE
   * would not tell).
   */
  async function refusedUnwritten(call: () => Promise<unknown>): Promise<Error> {
    const before = await snapshot();
    const err = await rejection(call);
    expect(await snapshot()).toEqual(before);
    return err;
  }

  beforeAll(async () => {
    app = await createLockApp({
      keyPrefix: prefix,
      queue: {
        maxPayloadBytes: LIMIT,
        maxResultBytes: MAX_RESULT,
        queues: { small: { maxPayloadBytes: SMALL } },
      },
    });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });

  describe('maxPayloadBytes', () => {
    it('enqueue stores a payload of exactly the limit and refuses one byte more, writing nothing', async () => {
      const q = fresh();
      expect(await queues.enqueue(q, 'at', { payload: sized(LIMIT) })).toBe(1);
      expect((await queues.top(q))[0].payload).toBe(sized(LIMIT));
      const err = await refusedUnwritten(() =>
        queues.enqueue(q, 'over', { payload: sized(LIMIT + 1) }),
      );
      expectTooLarge(err, LIMIT + 1, LIMIT, 'queue.maxPayloadBytes');
      expect(err.message).toBe(
        `queue '${q}': payload is ${LIMIT + 1} bytes (UTF-8 JSON); the limit is ${LIMIT} bytes (queue.maxPayloadBytes)`,
      );
      expect((err as QueueError).argument).toBe('payload');
      expect((await queues.stats(q)).ready).toBe(1);
    });

    it('refuses a whole enqueue of many ids whose payload is too large (none added)', async () => {
      const q = fresh();
      const ids = Array.from({ length: 100 }, (_, i) => `id-${i}`);
      const err = await refusedUnwritten(() =>
        queues.enqueue(q, ids, { payload: { text: sized(LIMIT) } }),
      );
      expectTooLarge(err, LIMIT + 9, LIMIT, 'queue.maxPayloadBytes');
      expect((await queues.stats(q)).ready).toBe(0);
    });

    it('measures the JSON text: a payload of 10 MB characters is refused at once, unsent', async () => {
      const q = fresh();
      const err = await refusedUnwritten(() =>
        queues.enqueue(q, 'big', { payload: { blob: 'x'.repeat(10_000_000) } }),
      );
      expectTooLarge(err, 10_000_011, LIMIT, 'queue.maxPayloadBytes');
    });

    it("a queue's own bound under queue.queues wins over the module's", async () => {
      expect(await queues.enqueue('small', 'at', { payload: sized(SMALL) })).toBe(1);
      const err = await refusedUnwritten(() =>
        queues.enqueue('small', 'over', { payload: sized(SMALL + 1) }),
      );
      expectTooLarge(err, SMALL + 1, SMALL, 'queue.queues.small.maxPayloadBytes');
      expect(await queues.enqueue(fresh(), 'other', { payload: sized(SMALL + 1) })).toBe(1);
    });

    it("enqueueFlow refuses a tree with one payload past its queue's bound, writing none of it", async () => {
      const q = fresh();
      const flow = (childPayload: string) => ({
        queue: q,
        id: 'parent',
        payload: { ok: true },
        children: [
          { queue: q, id: 'a', payload: 'fine' },
          { queue: 'small', id: 'b', payload: childPayload },
        ],
      });
      const err = await refusedUnwritten(() => queues.enqueueFlow(flow(sized(SMALL + 1))));
      expectTooLarge(err, SMALL + 1, SMALL, 'queue.queues.small.maxPayloadBytes');
      expect(err.message).toContain(`payload of flow node 'small:b' is ${SMALL + 1} bytes`);
      expect(await queues.get(q, 'parent')).toBeUndefined();
      await queues.enqueueFlow(flow(sized(SMALL)));
      expect((await queues.get('small', 'b'))?.payload).toBe(sized(SMALL));
    });

    it("schedule refuses a payload past the queue's bound, writing nothing", async () => {
      const q = fresh();
      const err = await refusedUnwritten(() =>
        queues.schedule(q, 'daily', { cron: '0 6 * * *', payload: sized(LIMIT + 1) }),
      );
      expectTooLarge(err, LIMIT + 1, LIMIT, 'queue.maxPayloadBytes');
      expect(err.message).toContain(`payload of schedule 'daily' is ${LIMIT + 1} bytes`);
      const at = await queues.schedule(q, 'daily', { cron: '0 6 * * *', payload: sized(LIMIT) });
      expect(at.id).toBe('daily');
      await queues.unschedule(q, 'daily');
    });

    it('task.progress, task.log and task.update take the limit and refuse one byte more, storing nothing of it', async () => {
      const q = fresh();
      const refused: Error[] = [];
      const refuse = (call: () => Promise<void>) =>
        call().then(
          () => refused.push(new Error('accepted')),
          (e: Error) => refused.push(e),
        );
      const worker = queues.process(q, async (task: RunningTask) => {
        await task.progress(sized(LIMIT));
        await refuse(() => task.progress(sized(LIMIT + 1)));
        await task.log(sized(LIMIT));
        await refuse(() => task.log(sized(LIMIT + 1)));
        await task.update(sized(LIMIT));
        await refuse(() => task.update(sized(LIMIT + 1)));
        return 'done';
      });
      await queues.enqueue(q, 't', { payload: 'start' });
      await waitFor(
        'the task to complete',
        async () => (await queues.get(q, 't'))?.state === 'completed',
      );
      await worker.close();
      expect(refused).toHaveLength(3);
      const [progress, line, update] = refused;
      expectTooLarge(progress, LIMIT + 1, LIMIT, 'queue.maxPayloadBytes');
      expect(progress.message).toContain(`progress of task 't' is ${LIMIT + 1} bytes`);
      // A log line is measured as stored: its JSON text.
      expectTooLarge(line, LIMIT + 1, LIMIT, 'queue.maxPayloadBytes');
      expect((line as QueueError).argument).toBe('line');
      expectTooLarge(update, LIMIT + 1, LIMIT, 'queue.maxPayloadBytes');
      const info = await queues.get(q, 't');
      expect(info?.progress).toBe(sized(LIMIT));
      expect(info?.payload).toBe(sized(LIMIT));
      expect(await queues.logs(q, 't')).toEqual([sized(LIMIT)]);
    });

    it('ack refuses a result past queue.maxResultBytes (the lease stays: ack again with less)', async () => {
      const q = fresh();
      await queues.enqueue(q, 'r');
      const [task] = await queues.claim(q);
      const err = await refusedUnwritten(() => queues.ack(task, sized(MAX_RESULT + 1)));
      expectTooLarge(err, MAX_RESULT + 1, MAX_RESULT, 'queue.maxResultBytes');
      expect(await queues.ack(task, sized(MAX_RESULT))).toBe(true);
    });
  });

  describe('ids', () => {
    const atCap = 'é'.repeat(MAX_ID / 2);
    const overCap = `${atCap}x`;

    it('enqueue takes a task id of 512 bytes and refuses 513 (and a 1,000,000-character one), writing nothing', async () => {
      const q = fresh();
      expect(await queues.enqueue(q, atCap)).toBe(1);
      expect((await queues.top(q))[0].id).toBe(atCap);
      for (const id of [overCap, 'x'.repeat(1_000_000)]) {
        const err = await refusedUnwritten(() => queues.enqueue(q, id));
        expect(err).toBeInstanceOf(QueueError);
        expect((err as QueueError).argument).toBe('id');
        expect(err.message).toContain(
          `is ${Buffer.byteLength(id)} bytes long; the limit is ${MAX_ID}`,
        );
      }
    });

    it('refuses a queue name, task, group or deduplication id with a lone surrogate (it would alias another), writing nothing', async () => {
      const q = fresh();
      const lone = 'x\uD800';
      const cases: [() => Promise<unknown>, string][] = [
        [() => queues.enqueue(lone, 'a'), 'queue'],
        [() => queues.enqueue(q, lone), 'id'],
        [() => queues.enqueue(q, ['a', lone]), 'ids'],
        [() => queues.enqueue(q, 'g', { group: lone }), 'group'],
        [() => queues.enqueue(q, 'd', { deduplication: { id: lone } }), 'deduplication.id'],
      ];
      for (const [call, argument] of cases) {
        const err = await refusedUnwritten(call);
        expect(err).toBeInstanceOf(QueueError);
        expect((err as QueueError).argument).toBe(argument);
        expect(err.message).toContain('is not well-formed Unicode (a lone surrogate)');
      }
      // A surrogate pair is one character, well-formed: taken.
      expect(await queues.enqueue(q, 'x\uD83D\uDE00')).toBe(1);
    });

    it('refuses a whole enqueue of many ids when one is over 512 bytes (none added)', async () => {
      const q = fresh();
      const err = await refusedUnwritten(() => queues.enqueue(q, ['a', 'b', overCap, 'c']));
      expect((err as QueueError).argument).toBe('ids');
      expect(err.message).toContain(`at index 2 is 513 bytes long; the limit is ${MAX_ID}`);
      expect((await queues.stats(q)).ready).toBe(0);
    });

    it('refuses a flow node id over 512 bytes, naming the node', async () => {
      const q = fresh();
      const err = await refusedUnwritten(() =>
        queues.enqueueFlow({ queue: q, id: 'p', children: [{ queue: q, id: overCap }] }),
      );
      expect(err).toBeInstanceOf(FlowError);
      expect(err.message).toContain(`flow node '${q}:p'.children[0]`);
      expect(err.message).toContain(`is 513 bytes long; the limit is ${MAX_ID}`);
    });

    it('group and deduplication ids take 512 bytes and refuse 513', async () => {
      const q = fresh();
      expect(await queues.enqueue(q, 'g', { group: atCap })).toBe(1);
      expect(await queues.enqueue(q, 'd', { deduplication: { id: atCap } })).toBe(1);
      const group = await refusedUnwritten(() => queues.enqueue(q, 'g2', { group: overCap }));
      expect(group.message).toContain(`'group': `);
      expect(group.message).toContain(`is 513 bytes long; the limit is ${MAX_ID}`);
      const dedup = await refusedUnwritten(() =>
        queues.enqueue(q, 'd2', { deduplication: { id: overCap } }),
      );
      expect((dedup as QueueError).argument).toBe('deduplication.id');
      expect(dedup.message).toContain(`is 513 bytes long; the limit is ${MAX_ID}`);
    });

    it("schedule ids take 495 bytes, so that their ticks' task ids (<id>:<ms>) stay within 512", async () => {
      const q = fresh();
      const longest = 'x'.repeat(495);
      const made = await queues.schedule(q, longest, { everyMs: 60_000 });
      expect(made.id).toBe(longest);
      expect(Buffer.byteLength(`${longest}:${8_640_000_000_000_000}`)).toBe(MAX_ID);
      const err = await refusedUnwritten(() =>
        queues.schedule(q, `${longest}x`, { everyMs: 60_000 }),
      );
      expect((err as QueueError).argument).toBe('scheduleId');
      expect(err.message).toContain('is 496 bytes long; the limit is 495');
      await queues.unschedule(q, longest);
    });
  });

  describe('maxAttempts', () => {
    it('enqueue takes the upper bound docs/queue.md states and refuses one more', async () => {
      const docs = readFileSync(join(__dirname, '../../docs/queue.md'), 'utf8');
      const row = /\| `enqueue` +\| `maxAttempts` +\| the worker's \(integer, 1 to ([\d,]+)\)/.exec(
        docs,
      );
      expect(row).not.toBeNull();
      const max = Number(row![1].replace(/,/g, ''));
      const q = fresh();
      expect(await queues.enqueue(q, 'max', { maxAttempts: max })).toBe(1);
      const err = await refusedUnwritten(() => queues.enqueue(q, 'over', { maxAttempts: max + 1 }));
      expect(err).toBeInstanceOf(QueueError);
      expect((err as QueueError).argument).toBe('maxAttempts');
      expect(err.message).toContain(`an integer from 1 to ${max}`);
      // A task with the largest limit is retried, not dead, after a failed attempt.
      const [task] = await queues.claim(q);
      expect(await queues.nack(task)).toBe('retried');
    });
  });
});

describe('maxPayloadBytes option', () => {
  const queueOption = (queue: object) => () => resolveModuleOptions({ queue });

  it('defaults to 1 MiB for every queue', () => {
    expect(resolveModuleOptions({}).queue.maxPayloadBytes).toBe(1_048_576);
  });

  it('takes 1 to 536,870,912 (512 MiB, the Redis string limit), at module and queue level', () => {
    const options = resolveModuleOptions({
      queue: { maxPayloadBytes: 536_870_912, queues: { a: { maxPayloadBytes: 1 }, b: {} } },
    }).queue;
    expect(options.maxPayloadBytes).toBe(536_870_912);
    expect(options.queues.get('a')).toEqual({ maxPayloadBytes: 1 });
    // A queue without its own bound gets the module's.
    expect(options.queues.get('b')).toEqual({ maxPayloadBytes: 536_870_912 });
  });

  it.each([
    [{ maxPayloadBytes: 0 }, 'queue.maxPayloadBytes'],
    [{ maxPayloadBytes: 536_870_913 }, 'queue.maxPayloadBytes'],
    [{ maxPayloadBytes: 1.5 }, 'queue.maxPayloadBytes'],
    [{ maxPayloadBytes: '1mb' }, 'queue.maxPayloadBytes'],
    [{ queues: { a: { maxPayloadBytes: 0 } } }, 'queue.queues.a.maxPayloadBytes'],
    [{ queues: { a: { maxPayloadBytes: 536_870_913 } } }, 'queue.queues.a.maxPayloadBytes'],
    [{ queues: { a: { maxSize: 5 } } }, 'queue.queues.a.maxSize'],
    [{ queues: { a: 5 } }, 'queue.queues.a'],
    [{ queues: { '': {} } }, 'queue.queues'],
    [{ queues: { ['é'.repeat(257)]: {} } }, 'queue.queues'],
    [{ queues: [] }, 'queue.queues'],
  ])('refuses %p with a RedisLockOptionsError naming %s', (queue, option) => {
    const err = (() => {
      try {
        queueOption(queue)();
      } catch (e) {
        return e as RedisLockOptionsError;
      }
      throw new Error('accepted');
    })();
    expect(err).toBeInstanceOf(RedisLockOptionsError);
    expect(err.option).toBe(option);
    expect(err.message).toContain(`invalid option '${option}'`);
  });
});

describe('PayloadTooLargeError over HTTP (LockInterceptor)', () => {
  const prefix = uniquePrefix('queue-sizes-http');
  let app: INestApplication;

  @Controller('uploads')
  @UseInterceptors(LockInterceptor)
  class UploadsController {
    private n = 0;
    constructor(private readonly queues: QueueService) {}
    @Post()
    async create(@Body() body: { text: string }) {
      await this.queues.enqueue('http-uploads', `u-${++this.n}`, { payload: body.text });
      return { queued: this.n };
    }
  }

  @Module({
    imports: [
      RedisLockModule.forRoot({
        redis: testRedisUrl(),
        keyPrefix: prefix,
        queue: { maxPayloadBytes: SMALL },
      }),
    ],
    controllers: [UploadsController],
  })
  class HttpModule {}

  beforeAll(async () => {
    const ref = await Test.createTestingModule({ imports: [HttpModule] }).compile();
    app = ref.createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(() => app.close());

  it('answers 413 with the size and the limit; the limit itself is accepted', async () => {
    const post = (text: string) => request(app.getHttpServer()).post('/uploads').send({ text });
    expect((await post(sized(SMALL))).status).toBe(201);
    const res = await post(sized(SMALL + 1));
    expect(res.status).toBe(413);
    expect(res.body).toEqual({
      statusCode: 413,
      error: 'Payload Too Large',
      message: `payload is ${SMALL + 1} bytes (UTF-8 JSON); the limit is ${SMALL} bytes`,
      limit: SMALL,
    });
  });
});
