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
  /** The same, taken after each round (the orchestrator appends one entry per round). */
  loadAfterRounds: number[][];
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

/** 1, 5 and 15 minute load averages now, rounded to two decimals. */
export function currentLoadAverage(): number[] {
  return loadavg().map((l) => Math.round(l * 100) / 100);
}

/**
 * A warning for RESULTS.md when the 1-minute load average exceeded the CPU count at the start or
 * after any round (other processes competed with the bench for the cores); `undefined` otherwise.
 */
export function loadWarning(machine: MachineInfo): string | undefined {
  const samples = [
    { when: 'at the start', load: machine.loadAverage[0] },
    ...machine.loadAfterRounds.map((l, i) => ({ when: `after round ${i + 1}`, load: l[0] })),
  ];
  const worst = samples.reduce((a, b) => (b.load > a.load ? b : a));
  if (!(worst.load > machine.cpus)) return undefined;
  return (
    `**Warning:** the 1-minute load average exceeded the ${machine.cpus} CPUs during this run ` +
    `(${worst.load} ${worst.when}): other processes competed for the cores, so wall-time columns ` +
    '(throughput, latency) are less reliable than usual; the CPU µs columns are steadier.'
  );
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
    loadAverage: currentLoadAverage(),
    loadAfterRounds: [],
    date: new Date().toISOString(),
    commit: commit(),
  };
}
