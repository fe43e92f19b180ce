import { fork, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { Redis } from 'ioredis';
import type { LockLibrary } from '../adapters/lock-adapter';
import { SEMAPHORE_LIMIT } from '../adapters/semaphore-libraries';
import type { BenchConfig } from '../bench-config';
import { CpuMeter } from '../support/cpu-meter';
import { monotonicMs, sleep } from '../support/monotonic-clock';
import { uncountedClient } from '../support/request-counter';
import { summarizeContended } from './contended.shape';
import type { ContendedParams, ContendedReport } from './contended.child';
import { benchKey, type Shape } from './shape';

const ROOT = resolve(__dirname, '..', '..');

/** Waiters each process parks in the second part of the shape. */
export const PARKED_PER_PROCESS = 25;

/** How long the parked waiters are measured, in ms. */
const PARK_MS = 2_000;

/** One forked `semaphore.child.ts`; `call` sends an operation and resolves with its result. */
class SemaphoreChild {
  private constructor(private readonly child: ChildProcess) {}

  static start(): Promise<SemaphoreChild> {
    const child = fork(resolve(__dirname, 'semaphore.child.ts'), [], {
      cwd: ROOT,
      execArgv: ['-r', 'ts-node/register/transpile-only'],
      env: { ...process.env, TS_NODE_PROJECT: resolve(ROOT, 'tsconfig.json') },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new Promise((resolvePromise, reject) => {
      child.once('message', () => resolvePromise(new SemaphoreChild(child)));
      child.once('exit', (code) => reject(new Error(`semaphore child exited (${code})`)));
    });
  }

  call<T>(op: string, args?: unknown): Promise<T> {
    return new Promise((resolvePromise, reject) => {
      const onMessage = (m: { op: string; ok: boolean; result?: T; error?: string }) => {
        if (m.op !== op) return;
        this.child.off('message', onMessage);
        if (m.ok) resolvePromise(m.result as T);
        else reject(new Error(m.error));
      };
      this.child.on('message', onMessage);
      this.child.send({ op, args });
    });
  }

  stop(): void {
    this.child.kill('SIGKILL');
  }
}

async function commandsProcessed(admin: Redis): Promise<number> {
  const info = await admin.info('stats');
  return Number(/total_commands_processed:(\d+)/.exec(info)![1]);
}

/**
 * The semaphore shape: `config.contendedProcesses` processes share one semaphore of
 * `SEMAPHORE_LIMIT` permits for `config.contendedMs`, each looping acquire → INCR inside and the
 * counter → sleep `holdMs` → DECR → release (the contended loop, with the limit as capacity:
 * `overlaps` counts sections that saw more than the limit inside). Then the cost of parked
 * waiters: the permits are held by the harness while every process parks `PARKED_PER_PROCESS`
 * waiters, and for `PARK_MS` the requests the processes send per second, the server's commands per second (those
 * run inside scripts included) and its CPU are measured.
 */
export function semaphoreShape(config: BenchConfig): Shape<LockLibrary> {
  const processes = config.contendedProcesses;
  return {
    id: 'semaphore',
    title:
      `semaphore: limit ${SEMAPHORE_LIMIT}, ${processes} processes, one key, ` +
      `~${config.holdMs} ms per section (${config.contendedMs / 1000} s); then ` +
      `${processes * PARKED_PER_PROCESS} parked waiters for ${PARK_MS / 1000} s`,
    async run(library, ctx) {
      const base = benchKey('semaphore', library.id, ctx.round);
      const key = `${base}:sem`;
      const children = await Promise.all(
        Array.from({ length: processes }, () => SemaphoreChild.start()),
      );
      const admin = uncountedClient(new Redis(ctx.url));
      const holder = await library.create(ctx.url);
      try {
        await Promise.all(
          children.map((c) =>
            c.call('setup', { library: library.id, url: ctx.url, key, warmupPairs: 50 }),
          ),
        );
        const params: ContendedParams = {
          key,
          insideKey: `${base}:inside`,
          counterKey: `${base}:counter`,
          capacity: SEMAPHORE_LIMIT,
          startAt: monotonicMs() + 250,
          durationMs: config.contendedMs,
          holdMs: config.holdMs,
        };
        const reports = await Promise.all(
          children.map((c) => c.call<ContendedReport>('contended', params)),
        );
        const counted = Number(await admin.get(params.counterKey));
        const metrics = summarizeContended(reports, config.contendedMs, counted);

        // Parked waiters: all permits held here, every process parks its waiters.
        const parkKey = `${base}:park`;
        const held: unknown[] = [];
        for (let i = 0; i < SEMAPHORE_LIMIT; i++) held.push(await holder.acquire(parkKey));
        await Promise.all(
          children.map((c) => c.call('park', { key: parkKey, count: PARKED_PER_PROCESS })),
        );
        await sleep(300);
        const requests = () =>
          Promise.all(children.map((c) => c.call<number>('requests'))).then((counts) =>
            counts.reduce((a, b) => a + b, 0),
          );
        const meter = await CpuMeter.start(ctx.url);
        const requestsBefore = await requests();
        const before = await commandsProcessed(admin);
        await sleep(PARK_MS);
        const after = await commandsProcessed(admin);
        const requestsAfter = await requests();
        const { redisUs } = await meter.stop();
        for (const h of held) await holder.release(h);
        await Promise.all(children.map((c) => c.call('drained')));
        metrics.parkedRequestsPerSec = ((requestsAfter - requestsBefore) / PARK_MS) * 1000;
        // Commands inside Lua scripts included (total_commands_processed counts them).
        metrics.parkedCommandsPerSec = ((after - before - 1) / PARK_MS) * 1000;
        metrics.parkedRedisCpuUsPerSec = (redisUs / PARK_MS) * 1000;
        return metrics;
      } finally {
        await Promise.allSettled(children.map((c) => c.call('teardown')));
        for (const c of children) c.stop();
        await holder.close();
        await admin.quit();
      }
    },
  };
}
