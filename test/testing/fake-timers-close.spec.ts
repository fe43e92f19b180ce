import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { QueueService, QueueWorker, type RunningTask } from '../../lib';
import { RedisLockTestingModule } from '../../lib/testing';

// Under the fake timers docs/testing.md sets up, `app.close()` waits `drainTimeoutMs` of real
// time for a handler still running, then gives its task back: the fake clock, which nothing
// moves while the close is awaited, does not hold it.

/** Real time: taken before any test fakes the timers. */
const realSetTimeout = global.setTimeout;
const realSleep = (ms: number) =>
  new Promise<string>((resolve) => realSetTimeout(() => resolve('still closing'), ms));

@Injectable()
class Stuck {
  readonly signals: AbortSignal[] = [];

  @QueueWorker('jobs')
  async run(task: RunningTask<number>): Promise<void> {
    this.signals.push(task.signal);
    await new Promise(() => undefined);
  }
}

describe('app.close() under fake timers with a handler that never returns', () => {
  afterEach(() => jest.useRealTimers());

  it('closes after drainTimeoutMs and gives the task back, its signal aborted', async () => {
    jest.useFakeTimers();
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedisLockTestingModule.forRoot({ keyPrefix: 'close:', queue: { drainTimeoutMs: 50 } }),
      ],
      providers: [Stuck],
    }).compile();
    const app = await moduleRef.init();
    const queues = app.get(QueueService);
    const stuck = app.get(Stuck);
    const id = await queues.enqueue('jobs', 1);
    // The handler starts without the clock moving (the worker's end-of-tick work is unfaked).
    for (let i = 0; i < 100 && stuck.signals.length === 0; i++) {
      await jest.advanceTimersByTimeAsync(1);
    }
    expect(stuck.signals).toHaveLength(1);

    const closed = app.close().then(() => 'closed');
    // The fake clock stays where it is: only real time passes.
    expect(await Promise.race([closed, realSleep(5_000)])).toBe('closed');
    expect(stuck.signals[0].aborted).toBe(true);
    expect(String((stuck.signals[0].reason as Error).message)).toContain(
      `task '${id}' was given back`,
    );
  });
});
