import { Redis } from 'ioredis';
import { redisCpuUs } from './cpu-meter';
import { monotonicMs } from './monotonic-clock';
import { uncountedClient } from './request-counter';

/** What the redis-server did over a measured window. */
export interface RedisLoad {
  /** Commands Redis executed per second, those run inside Lua scripts included. */
  commandsPerSec: number;
  /** Redis CPU time (user + system) over the window's wall time, in % of one core. */
  cpuPct: number;
}

/**
 * Commands Redis has executed since it started, by `INFO commandstats` (each `EVALSHA` counts
 * once, and so does each command its script runs). `INFO` itself is left out: during a window
 * only the meter sends it (ioredis sends it on connecting, not on a live connection). `TIME` is
 * not left out: the lock scripts call it.
 */
export async function redisCommandCount(client: Redis): Promise<number> {
  const info = await client.info('commandstats');
  let total = 0;
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (match[1] !== 'info') total += Number(match[2]);
  }
  return total;
}

/**
 * Measures the load of the redis-server at `url` over a window, on a connection of its own that
 * the request counter ignores: commands per second and CPU share.
 * @example
 * const meter = await RedisLoadMeter.start(url); await sleep(3_000); const load = await meter.stop();
 */
export class RedisLoadMeter {
  private constructor(
    private readonly client: Redis,
    private readonly commands: number,
    private readonly cpuUs: number,
    private readonly startedAt: number,
  ) {}

  /** Starts measuring (once connected). */
  static async start(url: string): Promise<RedisLoadMeter> {
    const client = uncountedClient(new Redis(url));
    await client.ping();
    const commands = await redisCommandCount(client);
    const cpuUs = await redisCpuUs(client);
    return new RedisLoadMeter(client, commands, cpuUs, monotonicMs());
  }

  /** Stops measuring and closes the meter's connection. */
  async stop(): Promise<RedisLoad> {
    const elapsedMs = monotonicMs() - this.startedAt;
    const commands = (await redisCommandCount(this.client)) - this.commands;
    const cpuUs = (await redisCpuUs(this.client)) - this.cpuUs;
    await this.client.quit();
    return {
      commandsPerSec: (commands / elapsedMs) * 1000,
      cpuPct: (cpuUs / 1000 / elapsedMs) * 100,
    };
  }
}
