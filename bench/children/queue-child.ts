/**
 * Entry point of the queue shapes' worker process (started by
 * `BenchChild.start(index, 'queue-child.ts')`): runs one consumer of one queue library, in a
 * process other than the one that enqueues, waits or cancels.
 *
 * Operations:
 * - `startWorker { library, url, queue, concurrency, handler }`: sets up `library` (an id of
 *   `queue-libraries.ts`) and starts its consumer. `handler`: `'result'` returns
 *   `{ n: payload.n }` at once (the waitFor shape); `'until-aborted'` waits for the job's signal
 *   and fails with its reason (the cancel shape), noting when it started and when the signal
 *   fired.
 * - `started { id }` / `aborted { id }`: resolve with the time (shared monotonic clock, ms) job
 *   `id`'s handler started / saw its signal abort, as soon as it did.
 * - `floorSubscribe { url, channel }`, then `floorReceived { id }`: the pub/sub floor of the cancel
 *   shape, a plain ioredis subscriber in this process; resolves with the time the message `id`
 *   arrived (the message's body is its id).
 * - `stopWorker`: stops the consumer and closes the library; `clock`: this process's reading of
 *   the shared monotonic clock; `cpu`: the CPU time this process used so far (user + system, µs).
 */
import 'reflect-metadata';
import { Redis } from 'ioredis';
import type { JobHandler, QueueAdapter, StopConsumer } from '../adapters/queue-adapter';
import { queueLibrary } from '../adapters/queue-libraries';
import { serveRequests } from '../support/child-server';
import { monotonicMs } from '../support/monotonic-clock';
import { installRequestCounter, uncountedClient } from '../support/request-counter';

installRequestCounter();

/** Parameters of `startWorker`. */
export interface QueueWorkerParams {
  library: string;
  url: string;
  queue: string;
  concurrency: number;
  handler: 'result' | 'until-aborted';
}

/** A time that one side sets and the other awaits, whichever comes first. */
class Moments {
  private readonly times = new Map<string, { at: Promise<number>; set: (t: number) => void }>();

  private entry(id: string) {
    let e = this.times.get(id);
    if (!e) {
      let set!: (t: number) => void;
      const at = new Promise<number>((resolve) => (set = resolve));
      e = { at, set };
      this.times.set(id, e);
    }
    return e;
  }

  set(id: string, t: number): void {
    this.entry(id).set(t);
  }

  at(id: string): Promise<number> {
    return this.entry(id).at;
  }

  clear(): void {
    this.times.clear();
  }
}

const started = new Moments();
const aborted = new Moments();
const floor = new Moments();
let subscriber: Redis | undefined;
let adapter: QueueAdapter | undefined;
let stop: StopConsumer | undefined;

const HANDLERS: Record<QueueWorkerParams['handler'], JobHandler> = {
  result: async ({ payload }) => ({ n: (payload as { n: number }).n }),
  'until-aborted': ({ id, signal }) => {
    // `signal` is read (ours: made) before the orchestrator learns that the handler runs.
    if (!signal) throw new Error('this library gives its handlers no AbortSignal');
    started.set(id, monotonicMs());
    return new Promise((_, reject) => {
      const onAbort = () => {
        aborted.set(id, monotonicMs());
        reject(signal.reason);
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  },
};

async function stopWorker(): Promise<void> {
  const [stopping, closing, floorClient] = [stop, adapter, subscriber];
  stop = adapter = subscriber = undefined;
  try {
    await stopping?.();
  } finally {
    await Promise.allSettled([closing?.close(), floorClient?.quit()]);
    started.clear();
    aborted.clear();
    floor.clear();
  }
}

serveRequests(
  {
    async startWorker({ library, url, queue, concurrency, handler }: QueueWorkerParams) {
      await stopWorker();
      adapter = await queueLibrary(library).create(url);
      stop = await adapter.work(queue, concurrency, HANDLERS[handler]);
    },
    started: ({ id }: { id: string }) => started.at(id),
    aborted: ({ id }: { id: string }) => aborted.at(id),
    async floorSubscribe({ url, channel }: { url: string; channel: string }) {
      subscriber = uncountedClient(new Redis(url));
      subscriber.on('message', (_channel: string, id: string) => floor.set(id, monotonicMs()));
      await subscriber.subscribe(channel);
    },
    floorReceived: ({ id }: { id: string }) => floor.at(id),
    stopWorker,
    clock: () => monotonicMs(),
    cpu: () => {
      const { user, system } = process.cpuUsage();
      return user + system;
    },
  },
  stopWorker,
);
