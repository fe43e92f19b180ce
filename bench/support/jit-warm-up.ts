import type { LockLibrary } from '../adapters/lock-adapter';
import type { QueueLibrary } from '../adapters/queue-adapter';
import type { BenchConfig } from '../bench-config';
import { monotonicMs } from './monotonic-clock';

/**
 * Runs every library of the run in this process for `config.jitWarmupMs` each before the first
 * round (lock libraries: acquire+release pairs; queue libraries: enqueue, then drain what was
 * enqueued), so that the first library measured does not pay for warming up the JIT of the code
 * every library shares (ioredis).
 */
export async function warmUp(
  url: string,
  config: BenchConfig,
  lockLibraries: readonly LockLibrary[],
  queueLibraries: readonly QueueLibrary[],
): Promise<void> {
  for (const library of lockLibraries) {
    const adapter = await library.create(url);
    try {
      const end = monotonicMs() + config.jitWarmupMs;
      while (monotonicMs() < end) {
        await adapter.release(await adapter.acquire(`bench:warm-up:${library.id}`));
      }
    } finally {
      await adapter.close();
    }
  }
  for (const library of queueLibraries) {
    const adapter = await library.create(url);
    try {
      const queue = `bench-warm-up-${library.id}`;
      const end = monotonicMs() + config.jitWarmupMs / 2;
      let n = 0;
      while (monotonicMs() < end) await adapter.enqueue(queue, `job-${n++}`, { n });
      const stop = await adapter.drain(queue, n, 10);
      await stop();
    } finally {
      await adapter.close();
    }
  }
}
