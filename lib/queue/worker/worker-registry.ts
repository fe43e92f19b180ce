import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { RedactingLogger } from '../../redaction/redacting-logger';
import type { RedisLockConnection } from '../../redis/redis-connection';
import { ThrottledWarning } from '../../redis/throttled-warning';
import type { QueueWorkerInfo } from '../interfaces/queue-options.interface';
import type { QueueRedisKeys } from '../queue-keys';
import { QUEUE_SCRIPTS } from '../queue-scripts';

/** How often an instance writes its workers' entries, in ms. */
export const WORKER_HEARTBEAT_MS = 5_000;
/** An entry not written again for this long is a dead instance's, and is dropped, in ms. */
export const WORKER_ENTRY_TTL_MS = 3 * WORKER_HEARTBEAT_MS;

/**
 * How long `handles` answers "yes" from one read of a queue's workers, in ms: a burst of tasks of
 * a name no handler here runs, passed on, costs one read, not one per task. (A "no" buries the
 * task: it is asked of a read made then, the rare path.)
 */
const HANDLES_READ_MS = 1_000;

/** What the registry reads of a running worker. */
export interface RegisteredWorker {
  readonly queue: string;
  readonly concurrency: number;
  /** Tasks (batches) its handlers run now. */
  readonly runningCount: number;
  /** The task names it handles (named handlers); empty: every task. */
  readonly names: readonly string[];
}

/** A worker's entry as stored (workers.lua's JSON). */
interface StoredWorker {
  i: string;
  h: string;
  p: number;
  c: number;
  r: number;
  n: string[];
  s: number;
}

/**
 * The registry of the queues' workers across instances (workers.lua): this instance writes the
 * entries of its running workers once every `WORKER_HEARTBEAT_MS` (one script call per queue, not
 * per task), drops a worker's entry when it closes, and `list` reads every instance's. An instance
 * that dies stops writing: its entries are dropped `WORKER_ENTRY_TTL_MS` later.
 */
export class WorkerRegistry {
  private readonly entries = new Map<RegisteredWorker, { field: string; since: number }>();
  /** Fields of closed workers still to drop, by queue. */
  private readonly closed = new Map<string, string[]>();
  private timer?: NodeJS.Timeout;
  /** Heartbeats in flight (awaited by `close`). */
  private readonly inFlight = new Set<Promise<void>>();
  private seq = 0;
  /**
   * Makes this registry's fields its own: `instanceId` (by default `<hostname>:<pid>`) is the
   * same for two modules in one process, or two containers sharing a host name and a pid, which
   * then wrote (and deleted) each other's entries, and a task named for a live worker's handler
   * was buried as unknown.
   */
  private readonly tag = randomBytes(4).toString('hex');
  private readonly host = hostname();
  private readonly warning: ThrottledWarning;
  /** The last read of each queue's workers by `handles`, and when it was made. */
  private readonly read = new Map<string, { at: number; workers: Promise<QueueWorkerInfo[]> }>();

  constructor(
    private readonly connection: RedisLockConnection,
    private readonly keysOf: (queue: string) => QueueRedisKeys,
    logger: RedactingLogger,
  ) {
    this.warning = new ThrottledWarning(logger);
  }

  /** Registers a started worker; its entry is written at once. */
  add(worker: RegisteredWorker): void {
    this.entries.set(worker, {
      field: `${this.connection.options.instanceId}#${this.tag}#${++this.seq}`,
      since: Date.now(),
    });
    if (!this.timer) {
      this.timer = setInterval(() => this.beatAll(), WORKER_HEARTBEAT_MS);
      this.timer.unref();
    }
    this.track(worker.queue);
  }

  /** Unregisters a worker that closed; its entry is dropped at once. */
  remove(worker: RegisteredWorker): void {
    const entry = this.entries.get(worker);
    if (!entry) return;
    this.entries.delete(worker);
    const fields = this.closed.get(worker.queue) ?? [];
    fields.push(entry.field);
    this.closed.set(worker.queue, fields);
    this.track(worker.queue);
  }

  /**
   * Writes the entries of `queue`'s workers at once, not at the next heartbeat: a worker's names
   * changed (a named handler added or closed while its loop runs).
   */
  touch(queue: string): void {
    this.track(queue);
  }

  /** The workers of `queue` on every live instance, oldest first. */
  async list(queue: string): Promise<QueueWorkerInfo[]> {
    const reply = (await this.connection.run(
      QUEUE_SCRIPTS.workers,
      [this.keysOf(queue).workers],
      [WORKER_ENTRY_TTL_MS, 'list'],
    )) as string[];
    const workers: QueueWorkerInfo[] = [];
    for (let i = 1; i < reply.length; i += 2) {
      const value = reply[i + 1];
      const w = JSON.parse(value.slice(value.indexOf('|') + 1)) as StoredWorker;
      workers.push({
        instance: w.i,
        host: w.h,
        pid: w.p,
        concurrency: w.c,
        running: w.r,
        names: w.n,
        since: w.s,
        heartbeatAt: Number(value.slice(0, value.indexOf('|'))),
      });
    }
    return workers.sort((a, b) => a.since - b.since || a.instance.localeCompare(b.instance));
  }

  /**
   * Whether a live worker of `queue` (on any instance, this one included) runs the tasks named
   * `name` (`undefined`: tasks without a name): it has a handler of that name, or no names at all
   * (it runs every task). A "yes" may come from a read of up to `HANDLES_READ_MS` ago; a "no",
   * which buries the task, only from a read started when it was asked or later: a handler added
   * elsewhere since the last read wrote its entry at once, and that older read would miss it. The
   * tasks of one claim, asked at once, share that read.
   */
  async handles(queue: string, name: string | undefined): Promise<boolean> {
    const asked = Date.now();
    const last = this.read.get(queue);
    if (last && asked - last.at <= HANDLES_READ_MS && runs(await last.workers, name)) return true;
    let fresh = this.read.get(queue);
    if (!fresh || fresh.at < asked) {
      fresh = { at: Date.now(), workers: this.list(queue) };
      this.read.set(queue, fresh);
    }
    return runs(await fresh.workers, name);
  }

  /** Stops the heartbeat and drops every entry of this instance (shutdown). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    for (const worker of [...this.entries.keys()]) this.remove(worker);
    await Promise.all(this.inFlight);
  }

  private beatAll(): void {
    for (const queue of new Set([...this.entries.keys()].map((w) => w.queue))) this.track(queue);
  }

  /** Starts a heartbeat of `queue`, kept in `inFlight` until it ends. */
  private track(queue: string): void {
    const beat = this.beat(queue).finally(() => this.inFlight.delete(beat));
    this.inFlight.add(beat);
  }

  /** One workers.lua call: writes the entries of `queue`'s workers here, drops the closed ones. */
  private async beat(queue: string): Promise<void> {
    const args: (string | number)[] = [WORKER_ENTRY_TTL_MS, 'beat'];
    for (const [w, entry] of this.entries) {
      if (w.queue !== queue) continue;
      const stored: StoredWorker = {
        i: this.connection.options.instanceId,
        h: this.host,
        p: process.pid,
        c: w.concurrency,
        r: w.runningCount,
        n: [...w.names],
        s: entry.since,
      };
      args.push(entry.field, JSON.stringify(stored));
    }
    const drops = this.closed.get(queue) ?? [];
    this.closed.delete(queue);
    args.push('', ...drops);
    try {
      await this.connection.run(QUEUE_SCRIPTS.workers, [this.keysOf(queue).workers], args);
    } catch (err) {
      // The next heartbeat writes the entries again; a closed worker's entry ages out.
      this.warning.warn(`queue '${queue}': worker heartbeat failed: ${(err as Error).message}`);
    }
  }
}

/** Whether one of `workers` runs the tasks named `name`: a handler of it, or no names at all. */
const runs = (workers: readonly QueueWorkerInfo[], name: string | undefined): boolean =>
  workers.some((w) => w.names.length === 0 || (name !== undefined && w.names.includes(name)));
