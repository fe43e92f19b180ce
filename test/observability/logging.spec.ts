import { Logger, type INestApplicationContext } from '@nestjs/common';
import { QueueService, RedisLockOptionsError } from '../../lib';
import { createLockApp, uniquePrefix, waitFor } from '../support/helpers';

describe('retryLogLevel: the log level of a failed attempt that is retried', () => {
  let app: INestApplicationContext;
  let queues: QueueService;
  const prefix = uniquePrefix('logging');

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix, queue: { retryLogLevel: 'off' } });
    queues = app.get(QueueService);
  });
  afterAll(() => app.close());
  afterEach(() => jest.restoreAllMocks());

  /** Runs a task that fails once, with worker options `options`; returns the retry log calls. */
  async function retryLogs(queue: string, options: object): Promise<Record<string, number>> {
    const calls: Record<string, number> = {};
    for (const level of ['error', 'warn', 'log', 'debug', 'verbose'] as const) {
      jest.spyOn(Logger.prototype, level).mockImplementation((...args: unknown[]) => {
        if (String(args[0]).includes(`queue '${queue}'`)) calls[level] = (calls[level] ?? 0) + 1;
      });
    }
    let completed = false;
    const worker = queues.process(
      queue,
      (task) => {
        if (task.attempt === 1) throw new Error('once');
        completed = true;
      },
      { backoffMs: 1, ...options },
    );
    await queues.enqueue(queue, 'x');
    await waitFor('the retry to succeed', () => completed);
    await worker.close();
    return calls;
  }

  it("logs at the worker's level, else the module's ('off' here), default warn", async () => {
    expect(await retryLogs('q-debug', { retryLogLevel: 'debug' })).toEqual({ debug: 1 });
    expect(await retryLogs('q-off', {})).toEqual({});
    const plain = await createLockApp({ keyPrefix: prefix });
    try {
      queues = plain.get(QueueService);
      expect(await retryLogs('q-default', {})).toEqual({ warn: 1 });
    } finally {
      queues = app.get(QueueService);
      await plain.close();
    }
  });

  it('rejects an unknown level (typed error naming the option)', () => {
    expect(() => queues.process('q', () => undefined, { retryLogLevel: 'loud' as never })).toThrow(
      /retryLogLevel/,
    );
    return expect(createLockApp({ queue: { retryLogLevel: 'x' as never } })).rejects.toThrow(
      RedisLockOptionsError,
    );
  });
});
