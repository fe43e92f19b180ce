import { Redis } from 'ioredis';
import { uncountedClient } from './request-counter';

/** CPU time spent between `start` and `stop`, in µs. */
export interface CpuSpent {
  /** This Node process (user + system). */
  clientUs: number;
  /** The bench redis-server (user + system, from `INFO cpu`). */
  redisUs: number;
}

/** CPU time the redis-server has used since it started (user + system, `INFO cpu`), in µs. */
export async function redisCpuUs(client: Redis): Promise<number> {
  const info = await client.info('cpu');
  const read = (field: string) => Number(new RegExp(`${field}:([\\d.]+)`).exec(info)?.[1] ?? NaN);
  return (read('used_cpu_user') + read('used_cpu_sys')) * 1e6;
}

/**
 * Measures CPU time of this process and of the redis-server at `url` over a stretch of work.
 * Unlike wall time, CPU time per operation hardly changes when other processes compete for the
 * cores, so it is the steadier comparison on a shared machine.
 * @example
 * const meter = await CpuMeter.start(url); await work(); const { clientUs, redisUs } = await meter.stop();
 */
export class CpuMeter {
  private constructor(
    private readonly client: Redis,
    private readonly processStart: NodeJS.CpuUsage,
    private readonly redisStart: number,
  ) {}

  /** Starts measuring. */
  static async start(url: string): Promise<CpuMeter> {
    const client = uncountedClient(new Redis(url));
    const redisStart = await redisCpuUs(client);
    return new CpuMeter(client, process.cpuUsage(), redisStart);
  }

  /** Stops measuring and closes the meter's connection. */
  async stop(): Promise<CpuSpent> {
    const own = process.cpuUsage(this.processStart);
    const redisUs = (await redisCpuUs(this.client)) - this.redisStart;
    await this.client.quit();
    return { clientUs: own.user + own.system, redisUs };
  }
}
