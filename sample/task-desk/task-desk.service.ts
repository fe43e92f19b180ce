import { Injectable } from '@nestjs/common';
import { type LeasedTask, LockService, QueueService } from '../../lib';
import { outageOf } from '../common/outage';
import { requireLock } from '../common/require-lock';
import { SampleConfig } from '../config/sample-config';
import { SampleRedis } from '../redis/sample-redis';
import type { AddTasksResult, DeskStatus, DeskTask, SubmitResult } from './task-desk.dto';
import { EditorBusyError, LeaseLostError, NoTaskHeldError } from './task-desk.errors';
import { DESK_QUEUE, deskKeys, editorLockKey, type DeskKeys } from './task-desk-keys';

/** Writes of a submission's record at most, after its ack (`recordSubmission`). */
const RECORD_ATTEMPTS = 3;
/** Pause before a submission's record is written again, in ms. */
const RECORD_RETRY_MS = 100;

/**
 * The task desk: a pool of articles (the `desk` queue) and editors who take one at a time.
 * `claim` leases a task to one editor; `ack` on submit finishes it; a lease that runs out puts
 * the task back in the pool at the next claim of anyone, with no janitor. Which editor holds which
 * lease is kept in Redis, so any app instance can serve any editor; an editor's calls run under
 * the lock `editor:<id>` (the controller's `@WithLock`), so two at once can't both take a task.
 */
@Injectable()
export class TaskDeskService {
  private readonly keys: DeskKeys;

  constructor(
    private readonly redis: SampleRedis,
    private readonly queues: QueueService,
    private readonly locks: LockService,
    private readonly config: SampleConfig,
  ) {
    this.keys = deskKeys(redis.prefix);
  }

  /** Puts tasks in the pool; an id already there (or being edited) is not added twice. */
  async addTasks(ids: string[]): Promise<AddTasksResult> {
    const added = await this.queues.enqueue(DESK_QUEUE, ids);
    return { added, ids };
  }

  /**
   * Hands the editor the next task of the pool for `deskLeaseMs`, or `null` when none is ready.
   * Runs under the lock `editor:<editor>`. A task the editor still holds that was acked by a
   * submit whose record write failed (`recordSubmission`) is recorded first, so the record is
   * put right even when the editor never submits again.
   * @throws EditorBusyError while the editor's current lease still runs
   */
  async next(editor: string): Promise<DeskTask | null> {
    requireLock(this.locks, editorLockKey(editor), 'TaskDeskService.next');
    const held = await this.heldTask(editor);
    if (held && (await this.wasAcked(held))) {
      await this.recordSubmission(editor, held);
    } else if (held) {
      const leftMs = held.leaseExpiresAt - (await this.redis.now());
      if (leftMs > 0) throw new EditorBusyError(editor, held.id, leftMs);
      // Its lease ran out: the task is back in the pool (this very claim may return it).
      await this.redis.client.hdel(this.keys.holders, editor);
    }
    const [task] = await this.queues.claim(DESK_QUEUE, 1, {
      leaseMs: this.config.deskLeaseMs,
      maxAttempts: this.config.deskMaxAttempts,
    });
    if (!task) return null;
    await this.redis.client.hset(this.keys.holders, editor, JSON.stringify(task));
    return {
      id: task.id,
      attempt: task.attempt,
      claimedAt: task.leaseExpiresAt - this.config.deskLeaseMs,
      leaseExpiresAt: task.leaseExpiresAt,
    };
  }

  /**
   * Finishes the editor's task (acks the lease), then forgets that the editor holds it. Runs
   * under the lock `editor:<editor>`. When the ack fails (e.g. a Redis timeout), the editor
   * still holds the task and may submit again while the lease runs (an ack of the same lease
   * sent again answers true). The submission is recorded per lease (`<attempt>:<task id>`), so a
   * write sent twice (ioredis resends a command whose reply was lost) counts once; a record write
   * that fails after the ack is tried again (`recordSubmission`).
   * @throws NoTaskHeldError when the editor holds none; LeaseLostError when the lease ran out
   *   and the task was handed out again
   */
  async submit(editor: string): Promise<SubmitResult> {
    requireLock(this.locks, editorLockKey(editor), 'TaskDeskService.submit');
    const held = await this.heldTask(editor);
    if (!held) throw new NoTaskHeldError(editor);
    // A stale lease token changes nothing and answers false: someone else has the task now.
    if (!(await this.queues.ack(held))) {
      await this.redis.client.hdel(this.keys.holders, editor);
      throw new LeaseLostError(editor, held.id);
    }
    await this.recordSubmission(editor, held);
    return { editor, taskId: held.id, attempt: held.attempt };
  }

  /** The pool's counts, who holds what, and what was submitted by whom. */
  async status(): Promise<DeskStatus> {
    const [pool, now, replies] = await Promise.all([
      this.queues.stats(DESK_QUEUE),
      this.redis.now(),
      this.redis.exec(
        this.redis.client.multi().hgetall(this.keys.holders).hgetall(this.keys.submissions),
      ),
    ]);
    const [holders, submissions] = replies as Record<string, string>[];
    const submitted: DeskStatus['submitted'] = {};
    for (const [field, by] of Object.entries(submissions)) {
      // `<attempt>:<task id>`: the attempt is digits, so the first ':' ends it.
      const taskId = field.slice(field.indexOf(':') + 1);
      submitted[taskId] = { by, times: (submitted[taskId]?.times ?? 0) + 1 };
    }
    return {
      pool,
      holders: Object.entries(holders)
        .map(([editor, json]) => {
          const task = JSON.parse(json) as LeasedTask;
          return {
            editor,
            taskId: task.id,
            attempt: task.attempt,
            leaseExpiresInMs: task.leaseExpiresAt - now,
          };
        })
        .sort((a, b) => a.editor.localeCompare(b.editor)),
      submitted,
    };
  }

  /**
   * Records who submitted the lease and forgets that the editor holds it, after its ack. The write
   * is idempotent, so a failed one (e.g. a Redis timeout) is sent again, `RECORD_ATTEMPTS` times in
   * all, `RECORD_RETRY_MS` apart, before the error reaches the editor: a task acked but not
   * recorded is then left only by a Redis out of reach for longer, and the editor, told to submit
   * again (503), finishes it on that submit (the same ack again answers true while completed tasks
   * are kept), or on their next `next`.
   */
  private async recordSubmission(editor: string, held: LeasedTask): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.redis.exec(
          this.redis.client
            .multi()
            .hdel(this.keys.holders, editor)
            .hset(this.keys.submissions, `${held.attempt}:${held.id}`, editor),
        );
        return;
      } catch (err) {
        if (attempt >= RECORD_ATTEMPTS || !outageOf(err)) throw err;
        await new Promise((resolve) => setTimeout(resolve, RECORD_RETRY_MS));
      }
    }
  }

  /**
   * Whether the queue completed `held` at its lease's attempt: only that lease's holder can have
   * acked it. Found while completed tasks are kept (`keepCompleted`, 1 day by default).
   */
  private async wasAcked(held: LeasedTask): Promise<boolean> {
    const task = await this.queues.get(DESK_QUEUE, held.id);
    return task?.state === 'completed' && task.attempts === held.attempt;
  }

  private async heldTask(editor: string): Promise<LeasedTask | null> {
    const json = await this.redis.client.hget(this.keys.holders, editor);
    return json === null ? null : (JSON.parse(json) as LeasedTask);
  }
}
