import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, release, type } from 'node:os';
import { Redis } from 'ioredis';
import { uncountedClient } from './request-counter';

/** Where and when a run happened, for RESULTS.md. */
export interface MachineInfo {
  /** CPUs available to this process (what `nproc` prints). */
  cpus: number;
  cpuModel: string;
  os: string;
  node: string;
  redis: string;
  /** 1, 5 and 15 minute load averages when the run started. */
  loadAverage: number[];
  /** ISO date of the start of the run. */
  date: string;
  /** Short commit of the checkout, when it is a git checkout. */
  commit?: string;
}

function cpuModel(): string {
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'));
    if (line) return line.split(':')[1].trim();
  } catch {
    // Not Linux: fall back to what Node reports.
  }
  return cpus()[0]?.model ?? 'unknown';
}

function commit(): string | undefined {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return undefined;
  }
}

/** Describes this machine and the bench server at `url`. */
export async function machineInfo(url: string): Promise<MachineInfo> {
  const client = uncountedClient(new Redis(url));
  const info = await client.info('server');
  await client.quit();
  return {
    cpus: availableParallelism(),
    cpuModel: cpuModel(),
    os: `${type()} ${release()}`,
    node: process.version,
    redis: /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown',
    loadAverage: loadavg().map((l) => Math.round(l * 100) / 100),
    date: new Date().toISOString(),
    commit: commit(),
  };
}
