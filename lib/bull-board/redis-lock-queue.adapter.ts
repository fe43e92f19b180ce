import { randomUUID } from 'node:crypto';
import { BaseAdapter } from '@bull-board/api/dist/queueAdapters/base.js';
import type {
  AppJobScheduler,
  JobCleanStatus,
  JobCounts,
  JobSchedulerUpdateResult,
  JobStatus,
  MetricsType,
  QueueJob,
  QueueJobOptions,
  QueueMetrics,
  Status,
} from '@bull-board/api/dist/types.js';
import { QueueError } from '../errors/queue.error';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { checkBoolean, checkKnownKeys } from '../options/validate';
import { checkTaskId } from '../queue/queue-arguments';
import { checkQueueName } from '../queue/queue-keys';
import { QueueService } from '../queue/queue.service';
import type { EnqueueOptions } from '../interfaces/queue-options.interface';
import type { QueueStats, QueueTaskInfo, QueueTaskState } from '../queue/interfaces/task.interface';
import { MAX_QUEUE_BATCH } from '../queue/queue.constants';
import { METRICS_KEEP_MS } from '../queue/metrics/queue-metrics';
import { BullBoardActionError } from './bull-board-action.error';
import { BullBoardJob, finishedAt, PROMOTE_REFUSED } from './bull-board-job';
import {
  BOARD_JOB_STATUSES,
  countOfState,
  countsOfStats,
  statesOfStatus,
} from './bull-board-states';

const MINUTE_MS = 60_000;

/** Options of a {@link RedisLockQueueAdapter}: bull-board's own queue options. */
export interface RedisLockQueueAdapterOptions {
  /**
   * Shows the queue without any action (no retry, remove, clean, pause, add): bull-board hides
   * the buttons and answers every action on the queue, its `POST …/add` included, `405`. On by
   * default, unlike bull-board's own adapters: the board's routes have no authentication of their
   * own, so set it to `false` only once something in front of the board admits operators alone.
   * @default true
   * @example readOnlyMode: false // the board is mounted behind an auth middleware
   */
  readOnlyMode?: boolean;
  /**
   * Offers "retry" on failed (dead or cancelled) jobs.
   * @default true with `readOnlyMode: false` (false in `readOnlyMode`)
   */
  allowRetries?: boolean;
  /**
   * Put before the queue name in the board (and in its URLs).
   * @default ''
   */
  prefix?: string;
  /** Shown as the queue's name instead of the name itself. */
  displayName?: string;
  /** Shown under the queue's name. */
  description?: string;
  /** Splits queue names into a tree in the board's menu (e.g. `':'`). */
  delimiter?: string;
}

const OPTION_KEYS = [
  'readOnlyMode',
  'allowRetries',
  'prefix',
  'displayName',
  'description',
  'delimiter',
] as const;
const STRING_OPTIONS = ['prefix', 'displayName', 'description', 'delimiter'] as const;
/** Starts {@link RedisLockQueueAdapter.getQueueQualifiedName}. */
const QUALIFIED_PREFIX = 'nestjs-redis-lock:';

/**
 * The states whose `list` runs oldest first (by when the task entered the state): "latest" reads
 * the newest end of them. The others are listed in the order they run (ready), come due (delayed)
 * or their lease expires (leased), and are read from the start.
 */
const OLDEST_FIRST: ReadonlySet<QueueTaskState> = new Set([
  'completed',
  'dead',
  'cancelled',
  'expired',
  'waiting-children',
]);

/** The job name bull-board's "Add job" form sends when its name field is left empty. */
const BOARD_DEFAULT_JOB_NAME = '__default__';

/**
 * The job options `addJob` takes (BullMQ's names), each with what it becomes: `delay` →
 * `delayMs`, `priority` → `priority`, `attempts` → `maxAttempts`, `lifo` → `lifo`, `group`
 * (`{ id }`, as the board shows a grouped job's options) → `group`.
 */
const ADD_JOB_OPTIONS = ['delay', 'priority', 'attempts', 'lifo', 'group'] as const;

/** bull-board clean statuses that are our ready tasks (`prioritized`: only those with a priority). */
const READY_CLEAN_STATUSES: ReadonlySet<string> = new Set(['wait', 'waiting', 'paused']);

/**
 * A bull-board queue adapter for a `QueueService` queue, so that a board already mounted with
 * `@bull-board/nestjs`, `@bull-board/express` or another server adapter shows it beside BullMQ
 * queues. Import it from `nestjs-redis-lock/bull-board` (it loads `@bull-board/api`).
 *
 * States: ready → `waiting` (`paused` while the queue is paused), delayed → `delayed`, leased →
 * `active` (with its progress), completed (kept by `keepCompleted`) → `completed` with its result,
 * dead then cancelled → `failed` with their error. Actions: retry of a dead job = `requeueDead`,
 * of a cancelled one = `enqueue` again, remove/clean = `remove`, pause/resume, add = `enqueue`,
 * empty = remove every ready task (delayed ones stay, as BullMQ's `drain()`), once
 * `readOnlyMode: false` opts in: by default the adapter is read-only, and bull-board refuses every
 * action with 405. Promote, update data, retry of a completed job and obliterate answer 405;
 * removing a running (leased) task answers 409; a bad argument from the board (a status, an
 * option, a value the queue refuses) answers 400. Job logs are the task's `task.log()` lines. All
 * of it: docs/bull-board.md.
 * @param queues the module's `QueueService`
 * @param queue the queue's name, or its `defineQueue` handle
 * @param options bull-board's queue options
 * @example
 * board.addQueue(new RedisLockQueueAdapter(queues, 'orders')); // read-only
 * board.addQueue(new RedisLockQueueAdapter(queues, 'mail', { readOnlyMode: false })); // behind auth
 */
export class RedisLockQueueAdapter extends BaseAdapter {
  private readonly queueName: string;

  constructor(
    private readonly queues: QueueService,
    queue: string | { readonly name: string },
    options: RedisLockQueueAdapterOptions = {},
  ) {
    // A completed task's id stays taken while it is kept: bull-board hides its "retry".
    const checked = checkAdapterOptions(options);
    super('bullmq', {
      ...checked,
      // Actions are opt-in (see RedisLockQueueAdapterOptions.readOnlyMode).
      readOnlyMode: checked.readOnlyMode ?? true,
      allowCompletedRetries: false,
    });
    if (!(queues instanceof QueueService)) {
      throw new RedisLockOptionsError('queues', queues, 'the QueueService of RedisLockModule');
    }
    this.queueName = checkQueueName(
      typeof queue === 'object' && queue !== null ? queue.name : queue,
    );
  }

  /** The queue's name in the board: `prefix` + its name. */
  getName(): string {
    return `${this.prefix}${this.queueName}`;
  }

  /** The queue's name (as BullMQ's adapter answers; bull-board's flow view asks it). */
  getQueueName(): string {
    return this.queueName;
  }

  /**
   * The key bull-board's flow view finds this adapter by (it asks every `bullmq` adapter on the
   * board, ours included, whenever any job's page is opened): not a BullMQ queue's `prefix:name`,
   * so no BullMQ job names it as its parent.
   */
  getQueueQualifiedName(): string {
    return `${QUALIFIED_PREFIX}${this.getName()}`;
  }

  /** `null`: tasks have no flows (bull-board then shows none). */
  async getFlowProducer(): Promise<null> {
    return null;
  }

  /** The board's tabs: `latest` and {@link BOARD_JOB_STATUSES}. */
  getStatuses(): Status[] {
    return ['latest', ...BOARD_JOB_STATUSES];
  }

  /** The statuses jobs are listed by (see docs/bull-board.md for the mapping). */
  getJobStatuses(): JobStatus[] {
    return [...BOARD_JOB_STATUSES];
  }

  /** `stats(queue)` as bull-board counts, taken at one instant. */
  async getJobCounts(): Promise<JobCounts> {
    return countsOfStats(await this.queues.stats(this.queueName));
  }

  /**
   * Jobs of `statuses` from `start` to `end` (inclusive). One status lists its states one after
   * the other (`failed`: dead tasks, oldest death first, then cancelled ones, then expired ones),
   * the page cut from that list with the counts of one `stats` read. Several statuses (the board's
   * "latest" tab) are merged, most recent first (by when each task entered its state), from up to
   * `end + 1` (at most `MAX_QUEUE_BATCH`) tasks of each state: the newest ones of the states
   * listed oldest first (completed, dead, cancelled, expired, waiting-children), the first ones of
   * ready, delayed and leased; the page is cut from that merged list. Either way pages neither
   * repeat nor skip a task that stays where it is, and a page past the end is empty.
   * @throws BullBoardActionError 400 for a `start` or `end` that is not a page (negative, not an
   *   integer)
   */
  async getJobs(statuses: JobStatus[], start = 0, end = start + 9): Promise<QueueJob[]> {
    return this.refusingBadArguments('list', async () => {
      const stats = await this.queues.stats(this.queueName);
      const limit = Math.min(Math.max(end - start + 1, 1), MAX_QUEUE_BATCH);
      const lists = [...new Set(statuses)]
        .map((status) => statesOfStatus(status, stats.paused))
        .filter((states) => states.length > 0);
      const states = [...new Set(lists.flat())];
      const total = states.reduce((n, state) => n + countOfState(stats, state), 0);
      // Past the end (bull-board's page=1e20 included): nothing, without asking Redis.
      if (start >= total) return [];
      let tasks: QueueTaskInfo[];
      if (lists.length <= 1) {
        tasks = await this.concatenated(lists[0] ?? [], stats, start, limit);
      } else {
        // A task on this page has fewer than start + limit newer tasks in its state.
        const window = Math.min(start + limit, MAX_QUEUE_BATCH);
        const pages = await Promise.all(
          states.map((state) =>
            this.queues.list(this.queueName, state, {
              offset: OLDEST_FIRST.has(state)
                ? Math.max(0, countOfState(stats, state) - window)
                : 0,
              limit: window,
            }),
          ),
        );
        tasks = pages
          .flat()
          .sort((a, b) => timestampOf(b) - timestampOf(a))
          .slice(start, start + limit);
      }
      return tasks.map((task) => this.job(task, stats.paused));
    });
  }

  /**
   * `get(queue, id)` as a bull-board job; `undefined` when unknown, or when `id` is no task id at
   * all (empty, or over 512 bytes): bull-board then answers 404.
   */
  async getJob(id: string): Promise<QueueJob | undefined> {
    if (!isTaskId(id)) return undefined;
    const [task, stats] = await Promise.all([
      this.queues.get(this.queueName, id),
      this.queues.stats(this.queueName),
    ]);
    return task && this.job(task, stats.paused);
  }

  /**
   * Enqueues `data` as the payload of a new task with a random id. `name` becomes the task's name
   * (so a worker's handler of that name runs it) unless it is empty or bull-board's placeholder
   * `__default__` (the form's name field left empty): the task then has none. Options, by
   * BullMQ's names: `delay` → `delayMs`, `priority` → `priority` (from -1000 to 1000, lower runs
   * sooner, as BullMQ's), `attempts` → `maxAttempts`, `lifo` → `lifo`, `group` (`{ id }`) →
   * `group`. Any other option (`jobId`, `removeOnComplete`, `backoff`, …) answers 400 and nothing
   * is added: a task that silently lacks what the operator asked for is worse than a refusal.
   * @throws BullBoardActionError 400 for another option or a value `enqueue` refuses (naming it)
   */
  async addJob(name: string, data: unknown, options: QueueJobOptions = {}): Promise<QueueJob> {
    const id = randomUUID();
    await this.refusingBadArguments('add', () =>
      this.queues.enqueue(this.queueName, id, enqueueOptionsOf(name, data, options)),
    );
    const job = await this.getJob(id);
    if (!job) throw new BullBoardActionError('add', `task '${id}' was claimed and finished`, 409);
    return job;
  }

  /**
   * Removes the tasks of `status` that were enqueued (completed, dead, cancelled and expired tasks:
   * that finished) more than `graceTimeMs` ago by this process's clock. Statuses, as BullMQ's
   * `clean` takes them: `wait`, `waiting` and `paused` are the ready tasks, `prioritized` the
   * ready tasks with a priority, `delayed`, `completed` and `waiting-children` themselves, and
   * `failed` the dead, cancelled and expired tasks. `active` answers 409 (running tasks cannot be
   * taken away); any other status 400.
   */
  async clean(status: JobCleanStatus, graceTimeMs: number): Promise<void> {
    const board = status as string;
    if (board === 'active') {
      throw new BullBoardActionError('clean', 'active (leased) tasks are running', 409);
    }
    const before = Date.now() - graceTimeMs;
    if (READY_CLEAN_STATUSES.has(board)) return this.removeAll('ready', before);
    if (board === 'prioritized') {
      return this.removeAll('ready', before, (task) => task.priority !== undefined);
    }
    if (board === 'failed') {
      for (const state of statesOfStatus('failed', false)) await this.removeAll(state, before);
      return;
    }
    if (board === 'delayed' || board === 'completed' || board === 'waiting-children') {
      return this.removeAll(board, before);
    }
    throw new BullBoardActionError(
      'clean',
      `unknown status ${JSON.stringify(board).slice(0, 100)}: expected one of wait, waiting, ` +
        'paused, prioritized, delayed, completed, failed, waiting-children',
      400,
      { argument: 'status' },
    );
  }

  /**
   * Removes every ready task, as bull-board's BullMQ adapter does with `drain()`: delayed
   * (scheduled) tasks stay, as do running and finished (completed, dead, cancelled) ones. Clean
   * of `delayed` removes the delayed ones.
   */
  async empty(): Promise<void> {
    await this.removeAll('ready', Infinity);
  }

  /** Whether `pause(queue)` is in effect. */
  async isPaused(): Promise<boolean> {
    return (await this.queues.stats(this.queueName)).paused;
  }

  /** `pause(queue)`: every worker on every instance stops claiming. */
  async pause(): Promise<void> {
    await this.queues.pause(this.queueName);
  }

  /** `resume(queue)`. */
  async resume(): Promise<void> {
    await this.queues.resume(this.queueName);
  }

  /** Answers 405: see `promote` of a job. */
  async promoteAll(): Promise<void> {
    throw new BullBoardActionError('promote', PROMOTE_REFUSED);
  }

  /** Answers 405: the queue's keys are not deleted from the board. */
  async obliterate(): Promise<void> {
    throw new BullBoardActionError('obliterate', 'use empty, or clean of failed jobs');
  }

  /**
   * The task's log, `logs(queue, id)`: the lines its handler gave `task.log()`, the last 100,
   * oldest first; empty when it has none, is unknown, or `id` is no task id at all.
   */
  async getJobLogs(id: string): Promise<string[]> {
    if (!isTaskId(id)) return [];
    return this.queues.logs(this.queueName, id);
  }

  /**
   * BullMQ's `getMetrics`, from `QueueService.metrics` (the last 14 days): `data` holds one count
   * per minute, newest first (the current minute, still being counted, first), `start`..`end`
   * of them (`end` -1: to the oldest); `completed` counts completed tasks, `failed` the tasks of
   * the board's failed status (dead, cancelled and expired). `meta.count`: the total of the 14
   * days; `meta.prevTS`: the start of the current minute.
   */
  async getMetrics(type: MetricsType, start = 0, end = -1): Promise<QueueMetrics> {
    const now = Date.now();
    const current = now - (now % MINUTE_MS);
    const points = await this.queues.metrics(this.queueName, {
      from: now - METRICS_KEEP_MS,
      to: now,
    });
    const minutes = Math.max(1, (current - (points[0]?.time ?? current)) / MINUTE_MS + 1);
    const data = new Array<number>(minutes).fill(0);
    let count = 0;
    for (const p of points) {
      const at = Math.round((current - p.time) / MINUTE_MS);
      if (at < 0 || at >= minutes) continue; // another instance's clock ahead of this one
      const n = type === 'completed' ? p.completed : p.dead + p.cancelled + p.expired;
      data[at] += n;
      count += n;
    }
    return {
      meta: { count, prevTS: current, prevCount: count },
      data: data.slice(start, end < 0 ? undefined : end + 1),
      count: data.length,
    };
  }

  /** `null`: the module's connection is not shared with the board (bull-board answers 404). */
  async getRedisInfo(): Promise<string | null> {
    return null;
  }

  /** `null`: the limit is write-only here (`setGlobalConcurrency`). */
  async getGlobalConcurrency(): Promise<number | null> {
    return null;
  }

  /**
   * `setGlobalConcurrency(queue, concurrency)`.
   * @throws BullBoardActionError 400 unless `concurrency` is an integer from 1 to 10,000
   */
  async setGlobalConcurrency(concurrency: number): Promise<void> {
    await this.refusingBadArguments('concurrency', () =>
      this.queues.setGlobalConcurrency(this.queueName, concurrency),
    );
  }

  /** The queue's recurring tasks (`QueueService.schedule`). */
  async getJobSchedulers(): Promise<Omit<AppJobScheduler, 'queueName'>[]> {
    return (await this.queues.schedules(this.queueName)).map((s) => ({
      id: s.id,
      name: s.id,
      ...(s.cron !== undefined && { pattern: s.cron }),
      ...(s.everyMs !== undefined && { every: s.everyMs }),
      ...(s.tz !== undefined && { tz: s.tz }),
      ...(s.limit !== undefined && { limit: s.limit }),
      ...(s.startAt !== undefined && { startDate: s.startAt }),
      ...(s.endAt !== undefined && { endDate: s.endAt }),
      ...(s.nextTick !== undefined && { next: s.nextTick }),
      ...(s.lastTick !== undefined && { lastRun: s.lastTick }),
      iterationCount: s.count,
      template: { data: s.payload },
    }));
  }

  /** How many recurring tasks the queue has. */
  async getJobSchedulersCount(): Promise<number> {
    return (await this.queues.schedules(this.queueName)).length;
  }

  /**
   * `QueueService.unschedule`; `false` (bull-board answers 404) for an id no schedule can have.
   */
  async removeJobScheduler(id: string): Promise<boolean> {
    try {
      return await this.queues.unschedule(this.queueName, id);
    } catch (error) {
      if (error instanceof QueueError && error.argument === 'scheduleId') return false;
      throw error;
    }
  }

  /** Never asked (`supportsJobSchedulerUpdate` is false): answers 405. */
  async updateJobScheduler(): Promise<JobSchedulerUpdateResult> {
    throw new BullBoardActionError('update scheduler', 'call QueueService.schedule');
  }

  /** Never asked (`supportsJobSchedulerRun` is false): answers 405. */
  async runJobSchedulerNow(): Promise<QueueJob | 'not-found'> {
    throw new BullBoardActionError('run scheduler', 'enqueue a task instead');
  }

  private job(task: QueueTaskInfo, paused: boolean): BullBoardJob {
    return new BullBoardJob(this.queues, task, paused, this.getQueueQualifiedName());
  }

  /**
   * Runs `run`, turning an argument error of the queue into a `BullBoardActionError` 400 of
   * `action` (see {@link BullBoardActionError.fromQueueError}); other errors, Redis being
   * unavailable among them, go on as they are (bull-board answers 500).
   */
  private async refusingBadArguments<T>(action: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw BullBoardActionError.fromQueueError(action, error);
    }
  }

  /**
   * Up to `limit` tasks from `offset` of the list that puts the tasks of `states` one after the
   * other; each state's size is its count in `stats`, so an offset past the dead tasks starts in
   * the cancelled ones at the right place.
   */
  private async concatenated(
    states: readonly QueueTaskState[],
    stats: QueueStats,
    offset: number,
    limit: number,
  ): Promise<QueueTaskInfo[]> {
    const tasks: QueueTaskInfo[] = [];
    for (const state of states) {
      if (tasks.length >= limit) break;
      const size = countOfState(stats, state);
      if (tasks.length === 0 && offset >= size && state !== states[states.length - 1]) {
        offset -= size;
        continue;
      }
      tasks.push(
        ...(await this.queues.list(this.queueName, state, {
          offset,
          limit: limit - tasks.length,
        })),
      );
      offset = 0;
    }
    return tasks;
  }

  /**
   * Removes the tasks in `state` whose time (enqueue time; finish time for finished ones) is before
   * `before` (and that `only` accepts), a page at a time. A task that is younger, that `only`
   * refuses, or that a worker claimed meanwhile, stays and is skipped; the walk ends at the first
   * empty page, so it ends.
   */
  private async removeAll(
    state: QueueTaskState,
    before: number,
    only: (task: QueueTaskInfo) => boolean = () => true,
  ): Promise<void> {
    for (let offset = 0; ;) {
      const page = await this.queues.list(this.queueName, state, {
        offset,
        limit: MAX_QUEUE_BATCH,
      });
      if (page.length === 0) return;
      const removed = await Promise.all(
        page.map((task) =>
          timestampOf(task) < before && only(task)
            ? this.queues.remove(this.queueName, task.id)
            : false,
        ),
      );
      offset += removed.filter((r) => !r).length;
    }
  }
}

/**
 * When a task entered its state, as "latest" orders jobs and clean ages them: when it finished
 * (completed, dead, cancelled), else its enqueue time.
 */
function timestampOf(task: QueueTaskInfo): number {
  return finishedAt(task) ?? task.enqueuedAt ?? task.time;
}

/** Whether `id` passes the queue's id check (so that a task could have it). */
function isTaskId(id: unknown): boolean {
  try {
    checkTaskId(id);
    return true;
  } catch (error) {
    if (error instanceof QueueError) return false;
    throw error;
  }
}

/**
 * `enqueue`'s options for bull-board's `addJob(name, data, options)` (see
 * {@link RedisLockQueueAdapter.addJob}); the values themselves are checked by `enqueue`.
 * @throws RedisLockOptionsError for an option outside {@link ADD_JOB_OPTIONS} (naming it
 *   `options.<key>`), or a `group` that is not `{ id }` (`addJob` answers both 400)
 */
function enqueueOptionsOf(name: unknown, data: unknown, options: unknown): EnqueueOptions {
  const o = checkKnownKeys('options', options ?? {}, ADD_JOB_OPTIONS);
  let group: string | undefined;
  if (o.group !== undefined) {
    const g = o.group;
    if (typeof g !== 'object' || g === null || Object.keys(g).join() !== 'id') {
      throw new RedisLockOptionsError('options.group', g, '{ id: <the group> }');
    }
    group = (g as { id?: string }).id;
  }
  return {
    ...(data !== undefined && { payload: data }),
    ...(name !== '' &&
      name !== undefined &&
      name !== BOARD_DEFAULT_JOB_NAME && {
        name: name as string,
      }),
    ...(o.delay !== undefined && { delayMs: o.delay as number }),
    ...(o.priority !== undefined && { priority: o.priority as number }),
    ...(o.attempts !== undefined && { maxAttempts: o.attempts as number }),
    ...(o.lifo !== undefined && { lifo: o.lifo as boolean }),
    ...(group !== undefined && { group }),
  };
}

function checkAdapterOptions(options: unknown): RedisLockQueueAdapterOptions {
  const o = checkKnownKeys('options', options, OPTION_KEYS);
  for (const key of ['readOnlyMode', 'allowRetries'] as const) {
    if (o[key] !== undefined) checkBoolean(key, o[key]);
  }
  for (const key of STRING_OPTIONS) {
    if (o[key] !== undefined && typeof o[key] !== 'string') {
      throw new RedisLockOptionsError(key, o[key], 'a string');
    }
  }
  return o as RedisLockQueueAdapterOptions;
}
