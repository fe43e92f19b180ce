import type { ChildProcess } from 'node:child_process';
import type { Redis } from 'ioredis';
import type { QueueService } from '../../lib';
import { exited, lineFrom, spawnTs } from './child';
import { waitFor } from './helpers';

// Crash-safety runs of the queue: worker processes (test/fixtures/queue-worker-child.ts) that
// record every handler run and ack in Redis under `<obsPrefix>obs:`, SIGKILLed mid-task.

/** A running worker process and its pid (the suffix of its `obs:inflight:<pid>` set). */
export interface QueueWorkerChild {
  child: ChildProcess;
  pid: string;
}

/**
 * Starts a worker process with `env` (REDIS_URL, PREFIX, QUEUE, LEASE_MS, CONCURRENCY, ...) and
 * resolves once its worker runs (it printed 'ready <pid>'). `fixture`: another worker fixture
 * that prints the same line.
 */
export async function spawnQueueWorker(
  env: NodeJS.ProcessEnv,
  fixture = 'test/fixtures/queue-worker-child.ts',
): Promise<QueueWorkerChild> {
  const child = spawnTs(fixture, [], env);
  const line = await lineFrom(child, /^ready \d+$/, 30_000);
  return { child, pid: line.split(' ')[1] };
}

/** What `killOneWorkerPerWave` runs. */
export interface CrashWaves {
  /** Enqueues the tasks (its module's key prefix is the children's PREFIX). */
  queues: QueueService;
  queue: string;
  /** The task ids, enqueued in `waves` equal slices. */
  ids: readonly string[];
  waves: number;
  /** Where the children record (OBS_REDIS_URL), and their PREFIX. */
  obs: Redis;
  obsPrefix: string;
  /** The live workers: the victims leave it, their replacements join it. */
  alive: Set<QueueWorkerChild>;
  /** Starts a replacement worker. */
  spawnWorker: () => Promise<QueueWorkerChild>;
}

/**
 * Enqueues the tasks wave by wave; in each wave, once a fifth of it is acked, SIGKILLs a worker
 * that is running tasks at that moment, and starts its replacement in the background while the
 * others keep going. Resolves, once every replacement runs, with the ids the victims had in
 * flight when they were killed (the only tasks that may run twice or miss their ack record).
 */
export async function killOneWorkerPerWave(run: CrashWaves): Promise<Set<string>> {
  const { queues, queue, ids, waves, obs, obsPrefix, alive } = run;
  const size = ids.length / waves;
  const inFlightAtKill = new Set<string>();
  const respawns: Promise<void>[] = [];
  for (let wave = 0; wave < waves; wave++) {
    await queues.enqueue(queue, ids.slice(wave * size, (wave + 1) * size), { payload: { wave } });
    let victim: QueueWorkerChild | undefined;
    await waitFor(
      `wave ${wave + 1} under way on a live worker`,
      async () => {
        if ((await obs.hlen(`${obsPrefix}obs:acks`)) < wave * size + size / 5) return false;
        for (const w of alive) {
          if ((await obs.scard(`${obsPrefix}obs:inflight:${w.pid}`)) > 0) victim = w;
        }
        return victim !== undefined;
      },
      30_000,
    );
    alive.delete(victim!);
    victim!.child.kill('SIGKILL');
    expect(await exited(victim!.child)).toBe('SIGKILL');
    for (const id of await obs.smembers(`${obsPrefix}obs:inflight:${victim!.pid}`)) {
      inFlightAtKill.add(id);
    }
    respawns.push(run.spawnWorker().then((w) => void alive.add(w)));
  }
  await Promise.all(respawns);
  return inFlightAtKill;
}

/** Waits until `queue` has no ready, delayed or leased task left: every task was acked. */
export function waitQueueDrained(queues: QueueService, queue: string): Promise<void> {
  return waitFor(
    'every task acked',
    async () => {
      const s = await queues.stats(queue);
      return s.ready + s.delayed + s.leased === 0;
    },
    30_000,
    50,
  );
}

/**
 * Expects no task lost (every handler ran to the end), no ack recorded twice, and an ack missing
 * only for a task a killed worker had in flight (it may have acked without recording it).
 */
export async function expectAckedOnce(
  obs: Redis,
  obsPrefix: string,
  ids: readonly string[],
  inFlightAtKill: ReadonlySet<string>,
): Promise<void> {
  const acks = await obs.hgetall(`${obsPrefix}obs:acks`);
  const completions = await obs.hgetall(`${obsPrefix}obs:completions`);
  expect(ids.filter((id) => !(Number(completions[id]) >= 1))).toEqual([]);
  expect(Object.entries(acks).filter(([, n]) => n !== '1')).toEqual([]);
  expect(ids.filter((id) => !acks[id] && !inFlightAtKill.has(id))).toEqual([]);
}
