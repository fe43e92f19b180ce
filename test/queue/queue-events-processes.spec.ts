import 'reflect-metadata';
import type { ChildProcess } from 'node:child_process';
import type { Redis } from 'ioredis';
import { queueRedisKeys } from '../../lib/queue/queue-keys';
import { exited, lineFrom, spawnTs } from '../support/child';
import { redisClient, testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';

const FIXTURE = 'test/fixtures/queue-events-child.ts';
const TASKS = 2_000;

/** Every stdout line of `child`, as they come. */
function linesOf(child: ChildProcess): string[] {
  const lines: string[] = [];
  let buffer = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    const parts = buffer.split('\n');
    buffer = parts.pop() ?? '';
    lines.push(...parts);
  });
  return lines;
}

/** `e <eventId> <type> <taskId> <attempt>` lines, as [eventId, type, taskId]. */
const eventsIn = (lines: string[]) =>
  lines.filter((l) => l.startsWith('e ')).map((l) => l.split(' ').slice(1, 4));

describe('Queue events across processes (3 worker processes, a producer, readers)', () => {
  const prefix = uniquePrefix('queue-events-processes');
  const queue = 'events';
  const env = (role: string, extra: NodeJS.ProcessEnv = {}) => ({
    ROLE: role,
    REDIS_URL: testRedisUrl(),
    PREFIX: prefix,
    QUEUE: queue,
    COUNT: String(TASKS),
    ...extra,
  });
  let redis: Redis;

  beforeAll(() => {
    redis = redisClient();
  });
  afterAll(() => redis.disconnect());

  it('2,000 tasks waited for from another process all get their result, a SIGKILLed worker loses none, and a reader that resumes from its last event id gets every event once, in order', async () => {
    // Starting a child compiles the library (ts-node): tens of seconds on a loaded machine.
    const workers = [0, 1, 2].map(() => spawnTs(FIXTURE, [], env('worker')));
    const reader1 = spawnTs(FIXTURE, [], env('reader'));
    const read1 = linesOf(reader1);
    await Promise.all([
      ...workers.map((w) => lineFrom(w, /^ready \d+$/, 150_000)),
      lineFrom(reader1, /^ready$/, 150_000),
    ]);

    const producer = spawnTs(FIXTURE, [], env('producer'));
    const produced = linesOf(producer);

    // Midway: one worker SIGKILLed while it runs tasks (they come back when their lease ends).
    await waitFor('600 tasks done', () => produced.includes('done 600'), 150_000);
    workers[0].kill('SIGKILL');
    await exited(workers[0]);

    // The first reader goes away too, and a new one resumes after the last event it printed.
    await waitFor('1,500 events read', () => eventsIn(read1).length >= 1_500, 60_000);
    reader1.kill('SIGKILL');
    await exited(reader1);
    const seenBefore = eventsIn(read1);
    const lastId = seenBefore[seenBefore.length - 1][0];
    const reader2 = spawnTs(FIXTURE, [], env('reader', { FROM: lastId }));
    const read2 = linesOf(reader2);

    await waitFor('the summary', () => produced.some((l) => l.startsWith('summary ')), 120_000);
    const summary = JSON.parse(produced.find((l) => l.startsWith('summary '))!.slice(8));
    expect(summary).toEqual({ done: TASKS, wrong: [], failed: [] });

    // Every event of the stream, as Redis holds it (nothing trimmed: eventsMaxLen 100,000).
    const key = queueRedisKeys(prefix, queue).events;
    const lastInStream = (await redis.xrevrange(key, '+', '-', 'COUNT', 1))[0][0];
    await waitFor(
      'the resumed reader at the end of the stream',
      () => eventsIn(read2).some(([id]) => id === lastInStream),
      30_000,
    );
    const stream = (await redis.xrange(key, '-', '+')).map(([id, fields]) => {
      const f = new Map<string, string>();
      for (let n = 0; n < fields.length; n += 2) f.set(fields[n], fields[n + 1]);
      return [id, f.get('t')!, f.get('i') ?? ''];
    });
    const read = [...seenBefore, ...eventsIn(read2)];
    expect(read.length).toBe(stream.length);
    expect(read).toEqual(stream);

    // Each task's events in a possible order: enqueued, then (active, stalled)*, active, completed.
    const byTask = new Map<string, string[]>();
    for (const [, type, id] of read) byTask.set(id, [...(byTask.get(id) ?? []), type]);
    expect(byTask.size).toBe(TASKS);
    const odd = [...byTask].filter(
      ([, types]) => !/^enqueued( active stalled)* active completed$/.test(types.join(' ')),
    );
    expect(odd).toEqual([]);
    // The killed worker's tasks came back through a lease expiry.
    const stalled = read.filter(([, type]) => type === 'stalled').length;
    expect(stalled).toBeGreaterThan(0);
    console.log(
      `${stream.length} events: ${seenBefore.length} read before the SIGKILL of the first reader, ${read.length - seenBefore.length} by the one resumed from ${lastId}; ${stalled} stalled after the worker SIGKILL`,
    );

    reader2.kill('SIGTERM');
    for (const w of workers.slice(1)) w.kill('SIGTERM');
    await Promise.all([reader2, ...workers.slice(1)].map(exited));
  }, 480_000);
});
