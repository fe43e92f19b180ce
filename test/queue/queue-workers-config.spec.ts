import 'reflect-metadata';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  QueueService,
  QueueWorker,
  RedisLockModule,
  RedisLockOptionsError,
  type RedisLockModuleOptions,
  type RunningTask,
} from '../../lib';
import { sleep, testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';

/** A stand-in for @nestjs/config's ConfigService: `get(key)` from one environment's values. */
@Injectable()
class FakeConfigService {
  static env: Record<string, unknown> = {};
  get<T>(key: string): T {
    return FakeConfigService.env[key] as T;
  }
}

@Module({ providers: [FakeConfigService], exports: [FakeConfigService] })
class FakeConfigModule {}

/** Peaks of tasks running at once, per handler. */
const peaks: Record<string, { running: number; peak: number; done: number }> = {};
async function run(key: string): Promise<void> {
  const p = (peaks[key] ??= { running: 0, peak: 0, done: 0 });
  p.running++;
  p.peak = Math.max(p.peak, p.running);
  await sleep(15);
  p.running--;
  p.done++;
}

@Injectable()
class Workers {
  // The decorator's values: the configuration below wins over them.
  @QueueWorker('cfg-reports', { concurrency: 1, maxAttempts: 5 })
  async report(task: RunningTask<{ fail?: boolean }>) {
    if (task.payload?.fail) throw new Error('report failed');
    await run('report');
  }

  @QueueWorker('cfg-mail', { name: 'welcome', concurrency: 1 })
  welcome() {
    return run('welcome');
  }

  @QueueWorker('cfg-mail', { name: 'invoice', concurrency: 1 })
  invoice() {
    return run('invoice');
  }
}

async function boot(
  queue: (config: FakeConfigService) => RedisLockModuleOptions['queue'],
  providers: (typeof Workers)[] = [],
): Promise<INestApplicationContext> {
  const ref = await Test.createTestingModule({
    imports: [
      RedisLockModule.forRootAsync({
        imports: [FakeConfigModule],
        inject: [FakeConfigService],
        useFactory: (config: FakeConfigService) => ({
          redis: testRedisUrl(),
          keyPrefix: uniquePrefix('queue-workers-config'),
          queue: queue(config),
        }),
      }),
    ],
    providers,
  }).compile();
  return ref.init();
}

describe('queue.workers: worker options from configuration (forRootAsync + ConfigService)', () => {
  it('overrides the decorator per queue, and per name for named handlers', async () => {
    FakeConfigService.env = { REPORTS_CONCURRENCY: 4, REPORTS_ATTEMPTS: 1, WELCOME: 3 };
    const app = await boot(
      (config) => ({
        workers: {
          'cfg-reports': {
            concurrency: config.get<number>('REPORTS_CONCURRENCY'),
            maxAttempts: config.get<number>('REPORTS_ATTEMPTS'),
          },
          'cfg-mail': { names: { welcome: { concurrency: config.get<number>('WELCOME') } } },
        },
      }),
      [Workers],
    );
    try {
      const queues = app.get(QueueService);
      await queues.enqueue(
        'cfg-reports',
        Array.from({ length: 12 }, (_, i) => `r${i}`),
      );
      await queues.enqueue('cfg-reports', 'bad', { payload: { fail: true } });
      await queues.enqueue(
        'cfg-mail',
        Array.from({ length: 9 }, (_, i) => `w${i}`),
        { name: 'welcome' },
      );
      await queues.enqueue('cfg-mail', ['i1', 'i2', 'i3'], { name: 'invoice' });
      await waitFor(
        'every task',
        () => peaks.report?.done === 12 && peaks.welcome?.done === 9 && peaks.invoice?.done === 3,
        10_000,
      );
      // Concurrency 4 and 3 from configuration (the decorators say 1); invoice keeps its 1.
      expect([peaks.report.peak, peaks.welcome.peak, peaks.invoice.peak]).toEqual([4, 3, 1]);
      // maxAttempts 1 from configuration (the decorator says 5): dead after one failure.
      await waitFor(
        'bad is dead',
        async () => (await queues.get('cfg-reports', 'bad'))?.state === 'dead',
      );
      expect((await queues.get('cfg-reports', 'bad'))?.attempts).toBe(1);
      // process() gets them too.
      const handle = queues.process('cfg-reports', () => undefined, { concurrency: 2 });
      expect(handle.concurrency).toBe(4);
      await handle.close();
    } finally {
      await app.close();
    }
  });

  it.each([
    [{ workers: { mail: { concurrency: 0 } } }, 'queue.workers.mail.concurrency'],
    [
      { workers: { mail: { limiter: { max: 0, durationMs: 1000 } } } },
      'queue.workers.mail.limiter.max',
    ],
    [{ workers: { mail: { timeoutMs: 'soon' } } }, 'queue.workers.mail.timeoutMs'],
    [{ workers: { mail: { batch: { size: 2 } } } }, 'queue.workers.mail.batch'],
    [
      { workers: { mail: { names: { welcome: { concurrency: -1 } } } } },
      'queue.workers.mail.names.welcome.concurrency',
    ],
    [
      { workers: { mail: { names: { welcome: { leaseMs: 5 } } } } },
      'queue.workers.mail.names.welcome.leaseMs',
    ],
    [{ workers: { '': { concurrency: 1 } } }, 'queue.workers'],
  ])(
    'fails the start with RedisLockOptionsError naming the queue and the option (%j)',
    async (queue, option) => {
      const err = await boot(() => queue as RedisLockModuleOptions['queue']).then(
        (app) => app.close().then(() => undefined),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect(err).toMatchObject({ option });
    },
  );
});
