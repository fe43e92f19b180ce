import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { freePort, redisServerBinary } from '../../scripts/redis-server';

/** A redis-server under callgrind whose instructions are counted between two points. */
export interface CallgrindServer {
  readonly url: string;
  readonly port: number;
  /** Zeroes the counters: what runs from here on is counted. */
  zero(): void;
  /** User-space instructions since the last `zero` (or the start); zeroes the counters again. */
  instructions(): number;
  stop(): Promise<void>;
}

/**
 * A redis-server of its own under valgrind's callgrind (`--hz 1`, so that background work stays
 * out of the count), ready when this resolves, its counters zeroed: what a figure of user-space
 * instructions counts no machine load moves (bench/script-instructions.ts,
 * bench/contended-cost.ts). Needs `valgrind` (Debian: `apt-get install valgrind`).
 */
export async function callgrindServer(): Promise<CallgrindServer> {
  const dir = mkdtempSync(join(tmpdir(), 'callgrind-redis-'));
  const port = await freePort();
  const server = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      `--callgrind-out-file=${dir}/callgrind.out`,
      redisServerBinary(),
      ...['--port', String(port), '--save', '', '--appendonly', 'no', '--hz', '1', '--dir', dir],
    ],
    { stdio: 'ignore' },
  );
  const ping = new Redis(port, { retryStrategy: () => 200, maxRetriesPerRequest: null });
  ping.on('error', () => undefined);
  await ping.ping();
  ping.disconnect();
  const control = (what: string) =>
    execFileSync('callgrind_control', [what, String(server.pid)], { stdio: 'ignore' });
  control('--zero');
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    zero: () => control('--zero'),
    instructions: () => {
      control('--dump');
      let total = 0;
      // The dump of the counters since the last zero: the files whose names end in a dump number.
      for (const file of readdirSync(dir).filter((f) => /^callgrind\.out\.\d+$/.test(f))) {
        const totals = /^(?:summary|totals): (\d+)/m.exec(readFileSync(join(dir, file), 'utf8'));
        if (totals) total = Number(totals[1]);
        rmSync(join(dir, file));
      }
      if (total === 0) throw new Error(`no callgrind dump in ${dir}`);
      control('--zero');
      return total;
    },
    stop: async () => {
      server.kill('SIGKILL');
      await new Promise((resolve) => server.once('exit', resolve));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
