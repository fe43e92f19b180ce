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

/**
 * How long after the entries were lost (`refill`) a read that shows no handler of a name is not
 * trusted, in ms: as long as an entry is trusted (`WORKER_ENTRY_TTL_MS`) — every instance that
 * counted as live then wrote its entries again by its next heartbeat or reconnect, or would have
 * aged out since.
 */
const REFILL_MS = WORKER_ENTRY_TTL_MS;

/** One read of a queue's registry: the live workers, and the fields of their entries. */
interface RegistryRead {
  readonly workers: QueueWorkerInfo[];
  readonly fields: ReadonlySet<string>;
}

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
 * that dies stops writing: its entries are dropped `WORKER_ENTRY_TTL_MS` later. Entries lost with
 * Redis's data (a restart without persistence, a flush) are written again as soon as this
 * instance sees it: a reconnect, a read without its own entries, a heartbeat that created them.
 */
export class WorkerRegistry {
  /** This instance's workers; `written`: its entry was written once (a heartbeat answered). */
  private readonly entries = new Map<
    RegisteredWorker,
    { field: string; since: number; written: boolean }
  >();
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
  /**
   * The last read of each queue's workers by `handles`, when it was made, and the fields of this
   * registry's entries of the queue then (written before it, on the same connection).
   */
  private readonly read = new Map<
    string,
    { at: number; own: readonly string[]; workers: Promise<RegistryRead> }
  >();
  /** Until when (`Date.now()`) `handles` answers "yes" without a read (`refill`). */
  private refillingUntil = 0;
  /** The client was ready once since `add` listened: its next 'ready' is a reconnect. */
  private wasReady = false;
  private readonly onReady = (): void => {
    if (this.wasReady) this.refill();
    this.wasReady = true;
  };

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
      written: false,
    });
    if (!this.timer) {
      this.timer = setInterval(() => this.beatAll(), WORKER_HEARTBEAT_MS);
      this.timer.unref();
      // A reconnect may be to a server that restarted empty (no persistence, a failover to an
      // empty replica): the entries are written again then, not up to a heartbeat later.
      this.wasReady = this.connection.client.status === 'ready' || this.connection.disconnected;
      this.connection.client.on('ready', this.onReady);
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
    return (await this.readAll(queue)).workers;
  }

  /** One 'list' call of workers.lua: the live workers of `queue`, oldest first, and their fields. */
  private async readAll(queue: string): Promise<RegistryRead> {
    const reply = (await this.connection.run(
      QUEUE_SCRIPTS.workers,
      [this.keysOf(queue).workers],
      [WORKER_ENTRY_TTL_MS, 'list'],
    )) as string[];
    const workers: QueueWorkerInfo[] = [];
    const fields = new Set<string>();
    for (let i = 1; i < reply.length; i += 2) {
      fields.add(reply[i]);
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
    workers.sort((a, b) => a.since - b.since || a.instance.localeCompare(b.instance));
    return { workers, fields };
  }

  /**
   * Whether a live worker of `queue` (on any instance, this one included) runs the tasks named
   * `name` (`undefined`: tasks without a name): it has a handler of that name, or no names at all
   * (it runs every task). A "yes" may come from a read of up to `HANDLES_READ_MS` ago; a "no",
   * which buries the task, only from a read started when it was asked or later: a handler added
   * elsewhere since the last read wrote its entry at once, and that older read would miss it. The
   * tasks of one claim, asked at once, share that read. A read that lacks an entry of this
   * registry's (the asking loop's own is one) shows entries lost — a restart without
   * persistence, a flush — and so does a reconnect: "yes" for `REFILL_MS` (`refill`), as a
   * registry that cannot be read; nothing is buried on a guess.
   */
  async handles(queue: string, name: string | undefined): Promise<boolean> {
    const asked = Date.now();
    const last = this.read.get(queue);
    if (last && asked - last.at <= HANDLES_READ_MS && runs((await last.workers).workers, name)) {
      return true;
    }
    if (Date.now() < this.refillingUntil) return true;
    let fresh = this.read.get(queue);
    if (!fresh || fresh.at < asked) {
      fresh = { at: Date.now(), own: this.fieldsOf(queue), workers: this.readAll(queue) };
      this.read.set(queue, fresh);
    }
    const { workers, fields } = await fresh.workers;
    // A refill that began while the read was under way (a reconnect) wins over it.
    if (runs(workers, name) || Date.now() < this.refillingUntil) return true;
    if (fresh.own.every((field) => fields.has(field))) return false;
    this.refill();
    return true;
  }

  /** Stops the heartbeat and drops every entry of this instance (shutdown). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.connection.client.off('ready', this.onReady);
    for (const worker of [...this.entries.keys()]) this.remove(worker);
    await Promise.all(this.inFlight);
  }

  /**
   * The entries were lost, or may have been (a reconnect): writes this instance's again at once,
   * and for `REFILL_MS` trusts no read that lacks a name's handler — other instances' entries
   * come back with their next heartbeat or reconnect. Rare: once per loss seen, or reconnect.
   * @param rewrite false when this instance's entries are being written again already
   */
  private refill(rewrite = true): void {
    if (rewrite) this.beatAll();
    this.refillingUntil = Date.now() + REFILL_MS;
    this.read.clear();
  }

  /** The fields of this registry's entries of `queue`. */
  private fieldsOf(queue: string): string[] {
    const fields: string[] = [];
    for (const [w, entry] of this.entries) if (w.queue === queue) fields.push(entry.field);
    return fields;
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
    const beaten: { written: boolean }[] = [];
    let firsts = 0;
    for (const [w, entry] of this.entries) {
      if (w.queue !== queue) continue;
      beaten.push(entry);
      if (!entry.written) firsts++;
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
      const [, created] = (await this.connection.run(
        QUEUE_SCRIPTS.workers,
        [this.keysOf(queue).workers],
        args,
      )) as [number, number];
      for (const entry of beaten) entry.written = true;
      // An entry written before had to be created again: the registry lost it (a flush, a
      // restart that this connection did not see), and other instances' entries with it. Within
      // a refill (a reconnect's: its beats find them lost too) the entries are being rewritten.
      if (created > firsts) this.refill(Date.now() >= this.refillingUntil);
    } catch (err) {
      // The next heartbeat writes the entries again; a closed worker's entry ages out.
      this.warning.warn(`queue '${queue}': worker heartbeat failed: ${(err as Error).message}`);
    }
  }
}

/** Whether one of `workers` runs the tasks named `name`: a handler of it, or no names at all. */
const runs = (workers: readonly QueueWorkerInfo[], name: string | undefined): boolean =>
  workers.some((w) => w.names.length === 0 || (name !== undefined && w.names.includes(name)));
