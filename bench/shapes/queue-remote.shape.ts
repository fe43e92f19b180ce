import { Redis } from 'ioredis';
import type { QueueAdapter, QueueLibrary } from '../adapters/queue-adapter';
import type { BenchConfig } from '../bench-config';
import { percentile } from '../support/bench-stats';
import { BenchChild } from '../support/bench-child';
import { CpuMeter } from '../support/cpu-meter';
import { monotonicMs, sleep } from '../support/monotonic-clock';
import { RedisLoadMeter } from '../support/redis-load-meter';
import { requestCount, uncountedClient } from '../support/request-counter';
import { checkSharedClock } from './handoff.shape';
import { queueName } from './queue.shape';
import type { Metrics, Shape } from './shape';

/** The worker process of these shapes: `bench/children/queue-child.ts`. */
const QUEUE_CHILD = 'queue-child.ts';

/** Tasks enqueued and awaited (or cancelled) unmeasured before each shape's measured part. */
const WARM_UP_TASKS = 100;
const WARM_UP_CANCELS = 5;

/** How long one wait may take before it counts as failed, in ms. */
const WAIT_TIMEOUT_MS = 30_000;

/**
 * How long the cancel shape waits for a handler's signal to abort, in ms: past the worker's lease
 * extension (a third of the 30 s default lease), which tells a worker of a cancel whose pub/sub
 * message was lost.
 */
const ABORT_WAIT_MS = 30_000;

/**
 * Runs `shape` with a worker of `library` in a child process started for it (`startWorker`
 * with `params`), and `library`'s adapter in this process; stops both afterwards.
 */
async function withRemoteWorker<T>(
  library: QueueLibrary,
  url: string,
  params: { queue: string; concurrency: number; handler: 'result' | 'until-aborted' },
  shape: (adapter: QueueAdapter, child: BenchChild) => Promise<T>,
): Promise<T> {
  const child = await BenchChild.start(0, QUEUE_CHILD);
  let adapter: QueueAdapter | undefined;
  try {
    await child.call('startWorker', { library: library.id, url, ...params });
    adapter = await library.create(url);
    return await shape(adapter, child);
  } finally {
    await adapter?.close().catch(() => undefined);
    await child.call('stopWorker', undefined, 30_000).catch(() => undefined);
    await child.stop();
  }
}

/** What `awaitEach` measured. */
interface Waits {
  /** From just before the enqueue to the wait resolving with the right result, ms. */
  latencies: number[];
  failures: number;
  firstError?: Error;
}

/**
 * Enqueues `count` tasks `<prefix>-<n>` (payload `{ n }`) and awaits each one's result, with
 * `inFlight` loops doing so concurrently; a wait that rejects, times out or resolves with a
 * result other than `{ n }` is a failure.
 */
async function awaitEach(
  adapter: QueueAdapter,
  queue: string,
  prefix: string,
  count: number,
  inFlight: number,
): Promise<Waits> {
  const waits: Waits = { latencies: [], failures: 0 };
  let next = 0;
  const loop = async () => {
    while (next < count) {
      const n = next++;
      const started = monotonicMs();
      try {
        const result = await adapter.enqueueAndWait(
          queue,
          `${prefix}-${n}`,
          { n },
          WAIT_TIMEOUT_MS,
        );
        if ((result as { n?: unknown } | null)?.n !== n) {
          throw new Error(`task ${n}: result ${JSON.stringify(result)}, expected { n: ${n} }`);
        }
        waits.latencies.push(monotonicMs() - started);
      } catch (err) {
        waits.failures++;
        waits.firstError ??= err as Error;
      }
    }
  };
  await Promise.all(Array.from({ length: inFlight }, loop));
  return waits;
}

/** Waits left parked (no worker running) at the end of the waitFor shape. */
export const PARKED_WAITS = 1_000;

/**
 * The end of the waitFor shape: the worker is stopped, `PARKED_WAITS` tasks are enqueued and
 * awaited (with `waitMs` each), and after `settleMs`, for `windowMs`, the commands per second the
 * redis-server runs (those inside scripts included) and its CPU: what parked waits cost while
 * nothing happens. The waits are left to the adapter's close (they reject then).
 */
async function parkedWaits(
  adapter: QueueAdapter,
  child: BenchChild,
  url: string,
  queue: string,
  { settleMs, windowMs, waitMs }: { settleMs: number; windowMs: number; waitMs: number },
): Promise<Metrics> {
  await child.call('stopWorker', undefined, 30_000);
  let failed = 0;
  const waits = Array.from({ length: PARKED_WAITS }, (_, n) =>
    adapter.enqueueAndWait(queue, `parked-${n}`, { n }, waitMs).catch(() => void failed++),
  );
  await sleep(settleMs);
  const meter = await RedisLoadMeter.start(url);
  await sleep(windowMs);
  const load = await meter.stop();
  // Every wait must still be waiting: none may have ended (nothing runs them) or failed early.
  const early = failed;
  void Promise.all(waits);
  return {
    parkedCommandsPerSec: load.commandsPerSec,
    parkedRedisCpuPct: load.cpuPct,
    parkedEndedEarly: early,
  };
}

/** The id of the "completion seen on another instance" shape (results.json, targets). */
export const WAIT_FOR_SHAPE_ID = 'wait-for';

/**
 * Queue shape "completion seen on another instance": a worker runs in a child process (its
 * handler returns `{ n: payload.n }` at once), and this process, another instance, enqueues
 * `config.waitForTasks` tasks and awaits each one's result with `config.waitForInFlight` in
 * flight: ours `enqueue` + `waitFor`, BullMQ `add` + `job.waitUntilFinished(queueEvents)`.
 * Latency: from just before the enqueue to the wait resolving with the right result (one clock:
 * this process). After `WARM_UP_TASKS` unmeasured. Metrics: `p50Ms`, `p90Ms`, `p99Ms`, `maxMs`,
 * `tasksPerSec`, `requestsPerTask` and `clientCpuUsPerTask` (this process: enqueue and wait),
 * `workerCpuUsPerTask` (the worker's process), `redisCpuUsPerTask`, `failures`. Then, the worker
 * stopped, `PARKED_WAITS` waits left parked (`parkedWaits`): `parkedCommandsPerSec`,
 * `parkedRedisCpuPct`, `parkedEndedEarly` (waits that ended while nothing ran them: must be 0).
 */
export function waitForShape(config: BenchConfig): Shape<QueueLibrary> {
  const { waitForTasks: tasks, waitForInFlight: inFlight } = config;
  return {
    id: WAIT_FOR_SHAPE_ID,
    title:
      `queue completion seen on another instance: ${tasks.toLocaleString('en-US')} tasks, ` +
      `${inFlight} in flight, each enqueued and awaited by this process, run by a worker ` +
      `(concurrency ${inFlight}) in another process; then ${PARKED_WAITS.toLocaleString('en-US')} ` +
      `waits parked with the worker stopped (${config.parkedWindowMs / 1000} s window)`,
    // Two processes started per run (ts-node), plus the waits of the slowest library.
    timeoutMs: 240_000,
    run(library, ctx) {
      const queue = queueName('waitfor', library.id, ctx.round);
      const params = { queue, concurrency: inFlight, handler: 'result' as const };
      return withRemoteWorker(library, ctx.url, params, async (adapter, child) => {
        await adapter.prepareWaits(queue);
        const warm = await awaitEach(adapter, queue, 'warm-up', WARM_UP_TASKS, inFlight);
        if (warm.failures > 0) throw warm.firstError!;
        const workerCpuBefore = await child.call<number>('cpu');
        const meter = await CpuMeter.start(ctx.url);
        const requestsBefore = requestCount();
        const started = monotonicMs();
        const waits = await awaitEach(adapter, queue, 'task', tasks, inFlight);
        const elapsedMs = monotonicMs() - started;
        const requests = requestCount() - requestsBefore;
        const cpu = await meter.stop();
        const workerUs = (await child.call<number>('cpu')) - workerCpuBefore;
        if (waits.latencies.length === 0) throw waits.firstError!;
        return {
          ...summarizeWaits(waits, tasks, elapsedMs, requests, { ...cpu, workerUs }),
          ...(await parkedWaits(adapter, child, ctx.url, queue, {
            settleMs: config.parkedSettleMs,
            windowMs: config.parkedWindowMs,
            waitMs: config.parkedWaitMs,
          })),
        };
      });
    },
  };
}

/** The metrics of the waitFor shape from what it measured (exported for the unit tests). */
export function summarizeWaits(
  waits: Waits,
  tasks: number,
  elapsedMs: number,
  requests: number,
  cpu: { clientUs: number; redisUs: number; workerUs: number },
): Metrics {
  const { latencies } = waits;
  return {
    p50Ms: percentile(latencies, 50),
    p90Ms: percentile(latencies, 90),
    p99Ms: percentile(latencies, 99),
    maxMs: Math.max(...latencies),
    tasksPerSec: (tasks / elapsedMs) * 1000,
    requestsPerTask: requests / tasks,
    clientCpuUsPerTask: cpu.clientUs / tasks,
    workerCpuUsPerTask: cpu.workerUs / tasks,
    redisCpuUsPerTask: cpu.redisUs / tasks,
    failures: waits.failures,
  };
}

/** One cancel of the cancel shape. */
interface CancelSample {
  /** From just before `cancel` was called here to the handler's signal aborting there, ms. */
  latencyMs?: number;
  /** The cancel call's own time (its answer back here), ms. */
  callMs: number;
  /** The library's answer (ours: `'signalled'` for a running task). */
  reply: string;
}

/**
 * Cancels the running tasks `ids` (each has started in the child), all at once: each cancel is
 * timed from just before its own call.
 */
async function cancelRunning(
  adapter: QueueAdapter,
  child: BenchChild,
  queue: string,
  ids: readonly string[],
): Promise<CancelSample[]> {
  const aborted = ids.map((id) =>
    child.call<number>('aborted', { id }, ABORT_WAIT_MS).catch(() => undefined),
  );
  const calls = await Promise.all(
    ids.map(async (id) => {
      const started = monotonicMs();
      const reply = await adapter.cancel!(queue, id);
      return { started, callMs: monotonicMs() - started, reply };
    }),
  );
  const at = await Promise.all(aborted);
  return calls.map(({ started, callMs, reply }, i) => ({
    ...(at[i] === undefined ? {} : { latencyMs: at[i]! - started }),
    callMs,
    reply,
  }));
}

/**
 * The pub/sub floor next to a cancel of `ids`: one plain ioredis `PUBLISH` per id from this
 * process to a plain subscriber in the child (`floorSubscribe`), all at once, each timed from just
 * before its own call to the message's arrival there. What any cancel that reaches another
 * process by pub/sub costs at the least, at that moment, with no queue logic.
 */
async function floorProbe(
  publisher: Redis,
  child: BenchChild,
  channel: string,
  ids: readonly string[],
): Promise<number[]> {
  const floorIds = ids.map((id) => `floor-${id}`);
  const received = floorIds.map((id) => child.call<number>('floorReceived', { id }, ABORT_WAIT_MS));
  const sent = await Promise.all(
    floorIds.map(async (id) => {
      const at = monotonicMs();
      await publisher.publish(channel, id);
      return at;
    }),
  );
  const at = await Promise.all(received);
  return at.map((t, i) => t - sent[i]);
}

/** Enqueues `ids` and resolves once each one's handler runs in the child. */
async function startRunning(
  adapter: QueueAdapter,
  child: BenchChild,
  queue: string,
  ids: readonly string[],
): Promise<void> {
  const running = ids.map((id) => child.call('started', { id }, WAIT_TIMEOUT_MS));
  await Promise.all(ids.map((id) => adapter.enqueue(queue, id, {})));
  await Promise.all(running);
}

/** The id of the cancel shape (results.json, targets). */
export const CANCEL_SHAPE_ID = 'cancel';

/**
 * Queue shape "cancel → the running handler's signal aborted on another process": a worker in a
 * child process (concurrency `config.cancelBurst`) runs tasks whose handler waits for
 * `task.signal`; this process enqueues a task, waits until its handler runs, calls
 * `cancel(queue, id)` and the child notes when the signal aborted (both on the shared monotonic
 * clock, checked first). `config.cancels` cancels one at a time, then as many again in bursts of
 * `config.cancelBurst` running tasks cancelled together. After `WARM_UP_CANCELS` unmeasured.
 * Right before each cancel (each burst), while its tasks run, the pub/sub floor of as many
 * messages (`floorProbe`): `floorP50Ms`, `floorP99Ms`, `floorBurstP50Ms`, `floorBurstP99Ms`.
 * Metrics: `p50Ms`, `p99Ms`, `maxMs` (one at a time), `burstP50Ms`, `burstP99Ms`, `burstMaxMs`,
 * `callP50Ms` (the cancel call's own time, one at a time), `notSignalled` (answers other than
 * `'signalled'`), `notAborted` (signals that did not abort within 30 s), `leftLeased` (tasks still
 * leased once the worker settled) and `notCancelled` (tasks missing from the cancelled set).
 */
export function cancelShape(config: BenchConfig): Shape<QueueLibrary> {
  const { cancels, cancelBurst: burst } = config;
  return {
    id: CANCEL_SHAPE_ID,
    title:
      `queue cancel → the running handler's signal aborted on another process: ` +
      `${cancels} running tasks cancelled one at a time, then ${cancels} in bursts of ${burst}`,
    timeoutMs: 240_000,
    run(library, ctx) {
      const queue = queueName('cancel', library.id, ctx.round);
      const params = { queue, concurrency: burst, handler: 'until-aborted' as const };
      return withRemoteWorker(library, ctx.url, params, async (adapter, child) => {
        if (!adapter.cancel || !adapter.cancelCounts) {
          throw new Error(`${library.label} cannot cancel a running job from another process`);
        }
        await checkSharedClock(child);
        const channel = `${queue}-floor`;
        await child.call('floorSubscribe', { url: ctx.url, channel });
        const publisher = uncountedClient(new Redis(ctx.url));
        try {
          await publisher.ping();
          const floor = { single: [] as number[], burst: [] as number[] };
          /** Cancels `ids` once their handlers run, right after a floor probe of as many. */
          const cancelAfterFloor = async (ids: string[], into: number[]) => {
            await startRunning(adapter, child, queue, ids);
            into.push(...(await floorProbe(publisher, child, channel, ids)));
            return cancelRunning(adapter, child, queue, ids);
          };
          for (let i = 0; i < WARM_UP_CANCELS; i++) {
            await cancelAfterFloor([`warm-up-${i}`], []);
          }
          const single: CancelSample[] = [];
          for (let i = 0; i < cancels; i++) {
            single.push(...(await cancelAfterFloor([`one-${i}`], floor.single)));
          }
          const bursts: CancelSample[] = [];
          for (let b = 0; b * burst < cancels; b++) {
            const size = Math.min(burst, cancels - b * burst);
            const ids = Array.from({ length: size }, (_, i) => `burst-${b}-${i}`);
            bursts.push(...(await cancelAfterFloor(ids, floor.burst)));
          }
          // The worker settles each cancelled task after its handler rejected: wait for the last.
          const deadline = monotonicMs() + 10_000;
          let counts = await adapter.cancelCounts(queue);
          while (counts.leased > 0 && monotonicMs() < deadline) {
            await new Promise((r) => setTimeout(r, 20));
            counts = await adapter.cancelCounts(queue);
          }
          return {
            ...summarizeCancels(single, bursts, counts, WARM_UP_CANCELS + 2 * cancels),
            floorP50Ms: percentile(floor.single, 50),
            floorP99Ms: percentile(floor.single, 99),
            floorBurstP50Ms: percentile(floor.burst, 50),
            floorBurstP99Ms: percentile(floor.burst, 99),
          };
        } finally {
          await publisher.quit().catch(() => undefined);
        }
      });
    },
  };
}

/** The metrics of the cancel shape from its samples (exported for the unit tests). */
export function summarizeCancels(
  single: readonly CancelSample[],
  bursts: readonly CancelSample[],
  counts: { leased: number; cancelled: number },
  expectedCancelled: number,
): Metrics {
  const latencies = (samples: readonly CancelSample[]) =>
    samples.flatMap((s) => (s.latencyMs === undefined ? [] : [s.latencyMs]));
  const one = latencies(single);
  const burst = latencies(bursts);
  const all = [...single, ...bursts];
  return {
    p50Ms: percentile(one, 50),
    p99Ms: percentile(one, 99),
    maxMs: one.length ? Math.max(...one) : NaN,
    burstP50Ms: percentile(burst, 50),
    burstP99Ms: percentile(burst, 99),
    burstMaxMs: burst.length ? Math.max(...burst) : NaN,
    callP50Ms: percentile(
      single.map((s) => s.callMs),
      50,
    ),
    notSignalled: all.filter((s) => s.reply !== 'signalled').length,
    notAborted: all.filter((s) => s.latencyMs === undefined).length,
    leftLeased: counts.leased,
    notCancelled: Math.max(0, expectedCancelled - counts.cancelled),
  };
}
