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
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { checkBoolean, checkKnownKeys } from '../options/validate';
import { checkQueueName } from '../queue/queue-keys';
import { QueueService } from '../queue/queue.service';
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
 * A bull-board queue adapter for a `QueueService` queue, so that a board already mounted with
 * `@bull-board/nestjs`, `@bull-board/express` or another server adapter shows it beside BullMQ
 * queues. Import it from `nestjs-redis-lock/bull-board` (it loads `@bull-board/api`).
 *
 * States: ready → `waiting` (`paused` while the queue is paused), delayed → `delayed`, leased →
 * `active` (with its progress), completed (kept by `keepCompleted`) → `completed` with its result,
 * dead then cancelled → `failed` with their error. Actions: retry of a dead job = `requeueDead`,
 * of a cancelled one = `enqueue` again, remove/clean = `remove`, pause/resume, add = `enqueue`,
 * empty = remove every ready and delayed task, once `readOnlyMode: false` opts in: by default the
 * adapter is read-only, and bull-board refuses every action with 405. Promote, retry of a
 * completed job, obliterate and metrics answer 405 (logs are empty); removing a running (leased)
 * task answers 409. All of it: docs/bull-board.md.
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
   * the other (`failed`: dead tasks, oldest death first, then cancelled ones, oldest cancel first),
   * the page cut from that list with the counts of one `stats` read. Several statuses (the board's
   * "latest" tab) are merged, most recent first, from the first `MAX_QUEUE_BATCH` tasks of each
   * state, and the page is cut from that merged list. Either way pages neither repeat nor skip a
   * task that stays where it is.
   */
  async getJobs(statuses: JobStatus[], start = 0, end = start + 9): Promise<QueueJob[]> {
    const stats = await this.queues.stats(this.queueName);
    const limit = Math.min(Math.max(end - start + 1, 1), MAX_QUEUE_BATCH);
    const lists = [...new Set(statuses)]
      .map((status) => statesOfStatus(status, stats.paused))
      .filter((states) => states.length > 0);
    let tasks: QueueTaskInfo[];
    if (lists.length <= 1) {
      tasks = await this.concatenated(lists[0] ?? [], stats, start, limit);
    } else {
      const window = { offset: 0, limit: Math.min(start + limit, MAX_QUEUE_BATCH) };
      const pages = await Promise.all(
        [...new Set(lists.flat())].map((state) => this.queues.list(this.queueName, state, window)),
      );
      tasks = pages
        .flat()
        .sort((a, b) => timestampOf(b) - timestampOf(a))
        .slice(start, start + limit);
    }
    return tasks.map((task) => this.job(task, stats.paused));
  }

  /** `get(queue, id)` as a bull-board job; `undefined` when unknown (bull-board answers 404). */
  async getJob(id: string): Promise<QueueJob | undefined> {
    const [task, stats] = await Promise.all([
      this.queues.get(this.queueName, id),
      this.queues.stats(this.queueName),
    ]);
    return task && this.job(task, stats.paused);
  }

  /**
   * Enqueues `data` as the payload of a new task with a random id, due `options.delay` ms from
   * now. The job name and `attempts` are not stored: tasks have no name, and attempts are a
   * worker option.
   */
  async addJob(_name: string, data: unknown, options: QueueJobOptions = {}): Promise<QueueJob> {
    const id = randomUUID();
    await this.queues.enqueue(this.queueName, id, { payload: data, delayMs: options.delay ?? 0 });
    const job = await this.getJob(id);
    if (!job) throw new BullBoardActionError('add', `task '${id}' was claimed and finished`, 409);
    return job;
  }

  /**
   * Removes the tasks of `status` that were enqueued (completed, dead and cancelled tasks: that
   * finished) more than `graceTimeMs` ago by this process's clock; `failed` is dead, cancelled and
   * expired tasks. `active` answers 409 (running tasks cannot be taken away).
   */
  async clean(status: JobCleanStatus, graceTimeMs: number): Promise<void> {
    if (status === 'active') {
      throw new BullBoardActionError('clean', 'active (leased) tasks are running', 409);
    }
    const before = Date.now() - graceTimeMs;
    const states: QueueTaskState[] =
      status === 'wait'
        ? ['ready']
        : status === 'failed'
          ? [...statesOfStatus('failed', false)]
          : [status];
    for (const state of states) await this.removeAll(state, before);
  }

  /**
   * Removes every ready and delayed task (as BullMQ's `empty`): running and finished (completed,
   * dead, cancelled) ones stay.
   */
  async empty(): Promise<void> {
    await this.removeAll('ready', Infinity);
    await this.removeAll('delayed', Infinity);
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

  /** Always empty: tasks keep no log. */
  async getJobLogs(): Promise<string[]> {
    return [];
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

  /** `setGlobalConcurrency(queue, concurrency)`. */
  async setGlobalConcurrency(concurrency: number): Promise<void> {
    await this.queues.setGlobalConcurrency(this.queueName, concurrency);
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

  /** `QueueService.unschedule`. */
  async removeJobScheduler(id: string): Promise<boolean> {
    return this.queues.unschedule(this.queueName, id);
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
   * `before`, a page at a time. A task that is younger, or that a worker claimed meanwhile, stays
   * and is skipped; the walk ends at the first empty page, so it ends.
   */
  private async removeAll(state: QueueTaskState, before: number): Promise<void> {
    for (let offset = 0; ;) {
      const page = await this.queues.list(this.queueName, state, {
        offset,
        limit: MAX_QUEUE_BATCH,
      });
      if (page.length === 0) return;
      const removed = await Promise.all(
        page.map((task) =>
          timestampOf(task) < before ? this.queues.remove(this.queueName, task.id) : false,
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
