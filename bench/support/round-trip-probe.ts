import { Redis } from 'ioredis';
import { monotonicMs } from './monotonic-clock';
import { uncountedClient } from './request-counter';

/**
 * Latency of each call of `send`, one at a time (each awaited), for `durationMs`, in ms.
 * @example
 * const latencies = await awaitedLatencies(() => client.set('k', 'v'), 2_000);
 */
export async function awaitedLatencies(
  send: () => Promise<unknown>,
  durationMs: number,
): Promise<number[]> {
  const latencies: number[] = [];
  const end = monotonicMs() + durationMs;
  while (monotonicMs() < end) {
    const sent = monotonicMs();
    await send();
    latencies.push(monotonicMs() - sent);
  }
  return latencies;
}

/**
 * The mean round trip of one awaited ioredis `PING` to `url`, in ms, over `durationMs` on a fresh
 * uncounted client (after 50 unmeasured pings). Shapes call it right before their measured window,
 * so that "= N round trips" compares two things measured under the same load.
 */
export async function ioredisRoundTripMs(url: string, durationMs: number): Promise<number> {
  const client = uncountedClient(new Redis(url));
  try {
    for (let i = 0; i < 50; i++) await client.ping();
    const latencies = await awaitedLatencies(() => client.ping(), durationMs);
    return latencies.reduce((a, b) => a + b, 0) / latencies.length;
  } finally {
    await client.quit();
  }
}
