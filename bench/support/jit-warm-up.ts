import { LOCK_LIBRARIES } from '../adapters/lock-libraries';
import { DRAIN_LIBRARIES } from '../adapters/queue-libraries';
import type { BenchConfig } from '../bench-config';
import { monotonicMs } from './monotonic-clock';

/**
 * Runs every library in this process for `config.jitWarmupMs` each before the first round (lock
 * libraries: acquire+release pairs; queue libraries: enqueue, then drain what was enqueued), so
 * that the first library measured does not pay for warming up the JIT of the code every library
 * shares (ioredis).
 */
export async function warmUp(url: string, config: BenchConfig, queues: boolean): Promise<void> {
  for (const library of LOCK_LIBRARIES) {
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
  if (!queues) return;
  for (const library of DRAIN_LIBRARIES) {
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
