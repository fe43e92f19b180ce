import { Inject, Injectable } from '@nestjs/common';
import type { LockService } from '../lock/lock.service';
import type { LockLineEntry } from '../lock/lock-inspection';
import type { QueueStats, QueueTaskInfo, QueueTaskState } from '../queue/interfaces/task.interface';
import type { QueueWorkerInfo } from '../queue/interfaces/queue-options.interface';
import type { QueueService } from '../queue/queue.service';
import { UnreadJson } from '../queue/queue-replies';
import type { RedisLockConnection } from '../redis/redis-connection';
import { DashboardCore } from './dashboard-core';
import { queueHistory, type DashboardHistory } from './dashboard-history';
import {
  localWaitersKey,
  lockNameOf,
  queueNameOf,
  recentEventsKey,
  shownLocksKey,
  throughputKey,
} from './dashboard-keys';
import { type ResolvedDashboardOptions } from './dashboard-options';
import {
  LOCAL_REPORT_STALE_MS,
  RECENT_EVENTS_MAX,
  SHOWN_LOCKS_KEEP_MS,
  SHOWN_LOCKS_MAX,
} from './dashboard-recorder';
import { globEscape, scanKeys } from './dashboard-scan';
import { DASHBOARD_SCRIPTS } from './dashboard-scripts';
import { DASHBOARD_OPTIONS } from './dashboard.constants';

/** Seconds shown by the throughput sparkline. */
const SPARKLINE_S = 60;
/** Queues shown at most. */
const MAX_QUEUES = 50;
/** Queue key parts that exist while a queue has tasks, settings or recent throughput. */
const QUEUE_PARTS = [
  'due',
  'leased',
  'dead',
  'config',
  'prio',
  'gtasks',
  'pending',
  'done',
  'cancelled',
  'expired',
  'throughput',
];
/** How long a queue found once stays listed after its keys are gone (it was emptied), in ms. */
const QUEUE_REMEMBERED_MS = 10 * 60_000;
/** Characters of a payload's, result's or progress's JSON text sent in a task list, at most. */
export const TASK_JSON_PREVIEW_CHARS = 1_000;

/**
 * The largest value a task list reads (64 KiB): a larger one is listed by its size alone. Redis
 * copies a value a script reads: a page of 1 MB payloads held its one thread ~1.4 ms a task.
 */
export const TASK_JSON_READ_BYTES = 65_536;
/** The reason a cancel from the page gives (the task's error reads `cancelled: <this>`). */
export const DASHBOARD_CANCEL_REASON = 'from the dashboard';

/** One held lock as the page shows it. */
export interface DashboardLock {
  /** The lock name (without the key prefix). */
  key: string;
  /** The holder's `instanceId`; `shared: <ids>` for a read lock; absent when unknown. */
  owner?: string;
  /** The holder's remaining TTL in ms. */
  ttlMs?: number;
  /** The lock's fence counter (`LockInspection.fence`: at least the holder's fence). */
  fence?: number;
  /** When this dashboard instance first saw the lock held by this owner (epoch ms). */
  seenSince: number;
  /** Waiting instances in order (as `LockService.inspect`'s `line`). */
  line: readonly LockLineEntry[];
  /** Members of the line, live or lapsed. */
  lineLength: number;
  /**
   * Callers waiting for the lock inside each instance, in its local cohort: behind a holder of
   * the same instance, or behind the instance's one entry in `line`. Only instances with waiting
   * callers, by `instanceId`. The serving instance's count is read live; the others' come from
   * their reports (once a second, for the locks a dashboard shows), so they show a second or two
   * after a lock first appears.
   */
  localWaiters: DashboardLocalWaiters[];
}

/** Callers of one instance waiting for a lock in its local cohort. */
export interface DashboardLocalWaiters {
  /** The `instanceId` of the instance. */
  instance: string;
  /** How many of its callers wait. */
  waiting: number;
}

/** One queue as the page shows it. */
export interface DashboardQueue extends QueueStats {
  /** The queue name. */
  name: string;
  /** Workers of this instance on the queue. */
  workersHere: number;
  /** The queue's workers on every instance (`QueueService.workers`). */
  workers: QueueWorkerInfo[];
  /** Enqueue time of the next ready task (epoch ms); absent when none is ready. */
  nextReadyEnqueuedAt?: number;
  /** Tasks completed by every instance in each of the last 60 seconds, oldest first. */
  throughput: number[];
}

/**
 * A JSON value of a task (payload, result, progress) as a task list sends it: its JSON text, cut
 * to its first 1,000 characters. `GET api/queues/:queue/tasks/:id` sends the whole value.
 */
export interface DashboardJson {
  /** The value's JSON text (`JSON.stringify`), or its first 1,000 characters. */
  json: string;
  /** Whether `json` was cut. */
  truncated: boolean;
  /** Length of the whole JSON text, in characters (a value the list read). */
  chars?: number;
  /**
   * Instead of `chars`, for a value over 64 KiB, which a task list does not read (`json` is
   * empty): its size as stored, in bytes. `GET api/queues/:queue/tasks/:id` sends it whole.
   */
  bytes?: number;
}

/**
 * One task of a task list (`GET api/queues/:queue/tasks?state=`): `QueueTaskInfo` with its JSON
 * values cut (`DashboardJson`) and its error without the stack, so that a page of tasks stays
 * small when results are large.
 */
export interface DashboardTask {
  /** The task id. */
  id: string;
  /** The state listed. */
  state: QueueTaskState;
  /**
   * Epoch ms on the Redis clock: the due time (ready, delayed), the lease expiry (leased), the
   * finish time (completed) or the time of death, cancel or expiry (dead, cancelled, expired).
   */
  time: number;
  /** Claims so far. */
  attempts: number;
  /** When it was (last) enqueued (epoch ms); absent for tasks of older versions. */
  enqueuedAt?: number;
  /** Its name (`enqueue`'s `name`); absent when none. */
  name?: string;
  /** Its priority; absent when none. */
  priority?: number;
  /** Its group; absent when none. */
  group?: string;
  /** `completed`, `dead`, `cancelled`, `expired`: when it finished (epoch ms). */
  finishedAt?: number;
  /** The last failure, or a cancel's reason: name and message (the stack is left out). */
  error?: { name: string; message: string };
  /** Message of the last failure; absent when none. */
  lastError?: string;
  /** The payload; absent when none. */
  payload?: DashboardJson;
  /** `completed`: the handler's return value; absent when it returned `undefined`. */
  result?: DashboardJson;
  /** The last value given to `task.progress()`; absent when none. */
  progress?: DashboardJson;
}

/** What `POST api/queues/:queue/tasks/:id/cancel` answers: `QueueService.cancel`'s outcome. */
export interface DashboardCancelReply {
  outcome: 'cancelled' | 'signalled' | 'finished' | 'not-found';
}

/** A lock timeout or lost lock recorded by any instance. */
export interface DashboardLockEvent {
  /** When it was recorded (epoch ms). */
  at: number;
  /** `timeout`: an acquisition gave up; `lost`: a held lock was found lost. */
  kind: 'timeout' | 'lost';
  /** The lock names (the first 10 of a larger multi-key acquisition: see `keysTotal`). */
  keys: string[];
  /** How many lock names the event had, when `keys` shows only the first ones. */
  keysTotal?: number;
  /** The event's `reason` (`timeout` / `aborted`; `taken` / `expired` / `unreachable`). */
  reason: string;
  /** The `instanceId` of the instance where it happened. */
  instance: string;
  /** How long the acquisition waited (timeouts only). */
  waitedMs?: number;
}

/** What the page polls every second. */
export interface DashboardOverview {
  /** The `instanceId` of the instance that answered. */
  instanceId: string;
  /** Whether the mutation endpoints are refused (`readOnly` option). */
  readOnly: boolean;
  /** The answering instance's clock (epoch ms), to date the other fields. */
  now: number;
  /**
   * Held locks; `truncated` when the scan or `maxLocks` cut the list; `unavailable` says why
   * none can be listed.
   */
  locks: { items: DashboardLock[]; truncated: boolean; unavailable?: string };
  /** Recent lock timeouts and lost locks of every instance, newest first. */
  recent: DashboardLockEvent[];
  /** The queues shown. */
  queues: DashboardQueue[];
  /** Whether the queue scan was cut short (`maxScanKeys`). */
  queuesTruncated: boolean;
}

/** Reads what the dashboard shows, and runs its actions through `QueueService`. */
@Injectable()
export class DashboardService {
  /** `key \0 owner \0 since` -> first seen (held locks of the last refresh only). */
  private seen = new Map<string, number>();
  /** Queue name -> when the scan last found it. */
  private readonly queuesSeen = new Map<string, number>();

  constructor(
    @Inject(DASHBOARD_OPTIONS) readonly options: ResolvedDashboardOptions,
    private readonly core: DashboardCore,
  ) {}

  /** The queue service of the app's `RedisLockModule` (the page's actions go through it). */
  get queues(): QueueService {
    return this.core.queues;
  }

  private get connection(): RedisLockConnection {
    return this.core.connection;
  }

  private get instanceId(): string {
    return this.connection.options.instanceId;
  }

  private get locks(): LockService {
    return this.core.locks;
  }

  private get prefix(): string {
    return this.connection.options.keyPrefix;
  }

  /**
   * Locks, recent lock events and queues in one answer.
   * @param search substring of the lock keys to show (case-sensitive; empty: all)
   */
  async overview(search = ''): Promise<DashboardOverview> {
    const [locks, recent, queues] = await Promise.all([
      this.heldLocks(search),
      this.recentEvents(),
      this.queueOverview(),
    ]);
    return {
      instanceId: this.instanceId,
      readOnly: this.options.readOnly,
      now: Date.now(),
      locks,
      recent,
      ...queues,
    };
  }

  /**
   * Held locks whose key contains `search`: a bounded `SCAN` of lock value keys, then
   * `LockService.inspect` of each (one script and one owner read per lock), then one script that
   * marks them shown and reads the other instances' local-waiter reports.
   */
  async heldLocks(search: string): Promise<DashboardOverview['locks']> {
    if (this.connection.options.nodes.length > 0) {
      return { items: [], truncated: false, unavailable: 'locks on quorum nodes are not listed' };
    }
    const pattern = `${globEscape(this.prefix)}lock:*${search ? `${globEscape(search)}*` : ''}`;
    const scan = await scanKeys(this.connection, pattern, this.options.maxScanKeys, 'string');
    const names = scan.keys
      .map((key) => lockNameOf(this.prefix, key))
      .filter((name): name is string => name !== undefined)
      .sort();
    const shown = names.slice(0, this.options.maxLocks);
    const inspected = await Promise.all(
      shown.map((name) => this.locks.inspect(name, { keyPrefix: this.prefix })),
    );
    const now = Date.now();
    const seen = new Map<string, number>();
    const items: DashboardLock[] = [];
    for (const lock of inspected) {
      if (!lock.held) continue;
      // A read lock has shared holders instead of one owner.
      const owner =
        lock.owner ??
        (lock.sharedHolders &&
          `shared: ${lock.sharedHolders.map((h) => h.owner ?? '?').join(', ')}`);
      const id = `${lock.key}\0${owner ?? ''}\0${lock.since ?? ''}`;
      const since = this.seen.get(id) ?? now;
      seen.set(id, since);
      items.push({
        key: lock.key,
        owner,
        ttlMs: lock.ttlMs,
        fence: lock.fence,
        seenSince: since,
        line: lock.line,
        lineLength: lock.lineLength,
        localWaiters:
          lock.localWaiters > 0 ? [{ instance: this.instanceId, waiting: lock.localWaiters }] : [],
      });
    }
    if (items.length > 0) await this.addReportedWaiters(items);
    // A search replaces only what it covers: the locks whose key matches it.
    for (const id of this.seen.keys()) {
      if (id.slice(0, id.indexOf('\0')).includes(search) && !seen.has(id)) this.seen.delete(id);
    }
    for (const [id, since] of seen) this.seen.set(id, since);
    return { items, truncated: scan.truncated || names.length > shown.length };
  }

  /**
   * Marks `items` shown, so that every instance reports its callers waiting for them, and adds
   * the other instances' live reports to `items` (one script).
   */
  private async addReportedWaiters(items: DashboardLock[]): Promise<void> {
    const reply = (await this.connection.run(
      DASHBOARD_SCRIPTS.showLocks,
      [shownLocksKey(this.prefix), localWaitersKey(this.prefix)],
      [
        SHOWN_LOCKS_KEEP_MS,
        SHOWN_LOCKS_MAX,
        LOCAL_REPORT_STALE_MS,
        ...items.map((lock) => lock.key),
      ],
    )) as string[];
    for (let i = 0; i < reply.length; i += 2) {
      // This instance's own count is the live one, read by inspect.
      if (reply[i] === this.instanceId) continue;
      const counts = JSON.parse(reply[i + 1]) as Record<string, number>;
      for (const lock of items) {
        const waiting = Object.hasOwn(counts, lock.key) ? counts[lock.key] : 0;
        if (waiting > 0) lock.localWaiters.push({ instance: reply[i], waiting });
      }
    }
    for (const lock of items) {
      lock.localWaiters.sort((a, b) => a.instance.localeCompare(b.instance));
    }
  }

  /** The recent lock timeouts and lost locks of every instance, newest first. */
  async recentEvents(): Promise<DashboardLockEvent[]> {
    const entries = await this.connection.call('dashboard LRANGE', (c) =>
      c.lrange(recentEventsKey(this.prefix), 0, RECENT_EVENTS_MAX - 1),
    );
    return entries.map((entry) => {
      const bar = entry.indexOf('|');
      return { at: Number(entry.slice(0, bar)), ...JSON.parse(entry.slice(bar + 1)) };
    });
  }

  /** The queues of the `queues` option, of this app's workers, and found by a bounded scan. */
  async queueNames(): Promise<{ names: string[]; truncated: boolean }> {
    const scan = await scanKeys(
      this.connection,
      `${globEscape(this.prefix)}queue:*`,
      this.options.maxScanKeys,
    );
    const found = scan.keys
      .map((key) => queueNameOf(this.prefix, key, QUEUE_PARTS))
      .filter((name): name is string => name !== undefined);
    const now = Date.now();
    for (const name of found) this.queuesSeen.set(name, now);
    for (const [name, at] of this.queuesSeen) {
      if (now - at > QUEUE_REMEMBERED_MS) this.queuesSeen.delete(name);
    }
    const names = [
      ...new Set([
        ...this.options.queues,
        ...this.queues.workerQueues(),
        ...[...this.queuesSeen.keys()].sort(),
      ]),
    ];
    return {
      names: names.slice(0, MAX_QUEUES),
      truncated: scan.truncated || names.length > MAX_QUEUES,
    };
  }

  private async queueOverview(): Promise<Pick<DashboardOverview, 'queues' | 'queuesTruncated'>> {
    const { names, truncated } = await this.queueNames();
    const queues = await Promise.all(names.map((name) => this.queue(name)));
    return { queues, queuesTruncated: truncated };
  }

  private async queue(name: string): Promise<DashboardQueue> {
    const [stats, next, throughput, workers] = await Promise.all([
      this.queues.stats(name),
      this.queues.list(name, 'ready', { offset: 0, limit: 1 }),
      this.connection.run(
        DASHBOARD_SCRIPTS.readThroughput,
        [throughputKey(this.prefix, name)],
        [SPARKLINE_S],
      ) as Promise<number[]>,
      this.queues.workers(name),
    ]);
    return {
      name,
      ...stats,
      workersHere: this.queues.workerCount(name),
      workers,
      nextReadyEnqueuedAt: next[0]?.enqueuedAt,
      throughput: throughput.map(Number),
    };
  }

  /** Dead tasks of `queue` (payload, attempts, last error), oldest death first. */
  dead(queue: string, offset: number, limit: number): Promise<QueueTaskInfo[]> {
    return this.queues.list(queue, 'dead', { offset, limit });
  }

  /**
   * Tasks of `queue` in `state` (`QueueService.list`, same order), with their payload, result
   * and progress cut to their first 1,000 characters of JSON.
   */
  async tasks(
    queue: string,
    state: QueueTaskState,
    offset: number,
    limit: number,
  ): Promise<DashboardTask[]> {
    const tasks = await this.queues.listPreviews(
      queue,
      state,
      { offset, limit },
      TASK_JSON_READ_BYTES,
    );
    return tasks.map(toDashboardTask);
  }

  /** The history of `queue` over `range` (default 1 h), summed per step (`DashboardHistory`). */
  history(queue: string, range = '1h'): Promise<DashboardHistory> {
    return queueHistory(this.queues, queue, range);
  }

  /** Cancels a task from the page (`QueueService.cancel`, reason `from the dashboard`). */
  async cancel(queue: string, id: string): Promise<DashboardCancelReply> {
    return { outcome: await this.queues.cancel(queue, id, { reason: DASHBOARD_CANCEL_REASON }) };
  }
}

/** A task as a task list sends it (see `DashboardTask`). */
export function toDashboardTask(task: QueueTaskInfo): DashboardTask {
  const row: DashboardTask = {
    id: task.id,
    state: task.state,
    time: task.time,
    attempts: task.attempts,
  };
  if (task.enqueuedAt !== undefined) row.enqueuedAt = task.enqueuedAt;
  if (task.name !== undefined) row.name = task.name;
  if (task.priority !== undefined) row.priority = task.priority;
  if (task.group !== undefined) row.group = task.group;
  if (task.finishedAt !== undefined) row.finishedAt = task.finishedAt;
  if (task.error) row.error = { name: task.error.name, message: task.error.message };
  if (task.lastError !== undefined) row.lastError = task.lastError;
  for (const field of ['payload', 'result', 'progress'] as const) {
    const json = dashboardJson(task[field]);
    if (json) row[field] = json;
  }
  return row;
}

/**
 * `value`'s JSON text, cut to `TASK_JSON_PREVIEW_CHARS`; `undefined` for `undefined`. A value
 * the list did not read (`UnreadJson`) comes as its size alone.
 */
export function dashboardJson(value: unknown): DashboardJson | undefined {
  if (value === undefined) return undefined;
  if (value instanceof UnreadJson) return { json: '', truncated: true, bytes: value.bytes };
  const text = JSON.stringify(value) ?? String(value);
  if (text.length <= TASK_JSON_PREVIEW_CHARS) {
    return { json: text, truncated: false, chars: text.length };
  }
  let end = TASK_JSON_PREVIEW_CHARS;
  // Never cut a surrogate pair in two (an emoji would end in a lone half).
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return { json: text.slice(0, end), truncated: true, chars: text.length };
}
