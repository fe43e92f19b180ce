import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { RedactingLogger } from '../../redaction/redacting-logger';
import { FlowError } from '../../errors/flow.error';
import { QueueFullError } from '../../errors/queue-full.error';
import type { ChildFailure, FlowTaskIds, TaskChildren } from '../interfaces/flow.interface';
import type { LeasedTask } from '../interfaces/task.interface';
import type { QueueRedisKeys } from '../queue-keys';
import { ThrottledWarning } from '../../redis/throttled-warning';
import { QUEUE_SCRIPTS } from '../queue-scripts';
import type { FlowStoreHost, ReplicaWait, SettleStep } from '../interfaces/queue-store.interface';
import { MAX_QUEUE_BATCH } from '../queue.constants';
import {
  addFlowCall,
  childCounts,
  childFailuresOf,
  childResultsOf,
  flowCalls,
  flowGroupKeys,
  parseFlowRecord,
  slotTag,
  type FlowRecord,
} from './flow-keys';
import type { FlowPlan } from './flow-tree';

/**
 * The flows' part of the queue store (docs/queue.md, "Flows"): writes trees (add-flow.lua),
 * applies the child outcomes left in outboxes (flow-apply.lua), reads a parent's children and
 * their outcomes. claim.lua, cancel.lua and remove.lua advance parents themselves; `QueueStore`
 * passes them the keys and calls `applyOutboxes` / `ended` after them.
 */
export class FlowStore {
  private readonly warning = new ThrottledWarning(new RedactingLogger('QueueService'));

  constructor(private readonly host: FlowStoreHost) {}

  /** The queues of the flow parents of `settles`' tasks that share `queue`'s slot. */
  parentQueues(queue: string, settles: readonly SettleStep[]): string[] {
    let queues: Set<string> | undefined;
    for (const s of settles) {
      const p = s.task.parent;
      if (p && (!this.host.connection.isCluster || slotTag(p.queue) === slotTag(queue))) {
        (queues ??= new Set()).add(p.queue);
      }
    }
    return queues ? [...queues] : [];
  }

  /**
   * Writes a checked flow (add-flow.lua): in one script when all its queues share a slot (one
   * node, or one hash tag), else one script per level and slot, parents first. A refused later
   * call (a full queue, an existing id) cancels what the earlier ones wrote.
   * @throws FlowError when a node's task exists already; QueueFullError when a queue would pass
   *   its `maxSize`
   */
  async add(plan: FlowPlan, wait: ReplicaWait | false | undefined): Promise<FlowTaskIds> {
    const calls = flowCalls(plan, !this.host.connection.isCluster);
    // Recorded in every flow record and parent link the flow writes (flow-keys.ts): a call that
    // finds it with its first node ran before (add-flow.lua), and a link counts only for the
    // parent its call wrote (includes/flow.lua).
    const callId = randomUUID();
    for (let i = 0; i < calls.length; i++) {
      const nodes = calls[i];
      const { keys, args, queues } = addFlowCall(
        nodes,
        (q) => this.host.keys(q),
        this.host.defaults.eventsMaxLen,
        this.host.defaults.maxSize ?? 0,
        callId,
      );
      let reply: (string | number)[];
      try {
        reply = (await this.host.write(
          QUEUE_SCRIPTS.addFlow,
          keys,
          args,
          nodes[0].queue,
          'enqueueFlow',
          wait,
        )) as (string | number)[];
      } catch (err) {
        if (i > 0) await this.cancelWritten(plan);
        throw err;
      }
      if (reply[0] === 'ok') continue;
      if (i > 0) await this.cancelWritten(plan);
      if (reply[0] === 'exists') {
        const n = nodes[Number(reply[1])];
        throw new FlowError(
          `'${n.name}'`,
          'a task with this id exists already in its queue; ' +
            (i === 0
              ? 'nothing of the flow was added'
              : 'what was written of the flow is cancelled'),
          'id',
        );
      }
      throw new QueueFullError(queues[Number(reply[1])], Number(reply[2]), Number(reply[3]));
    }
    return plan.ids;
  }

  /** Cancels the root of a flow whose writing was cut short (its written children with it). */
  private async cancelWritten(plan: FlowPlan): Promise<void> {
    const root = plan.nodes[0];
    const reason = JSON.stringify({
      name: 'QueueError',
      message: 'the flow could not be written whole',
    });
    await this.host.cancel(this.host.keys(root.queue), root.id, reason).catch(() => undefined);
  }

  /**
   * Applies the child outcomes waiting in the outboxes of `queues` to their parents
   * (flow-apply.lua), and then those of the parents' queues where a parent died. In the parent's
   * slot each entry is removed by the script that applies it; across slots it is applied first
   * (idempotent: a replay counts once) and removed after, so a crash in between loses nothing.
   * Failures are left for the next claim of the queue (it reports a non-empty outbox).
   */
  async applyOutboxes(queues: readonly string[]): Promise<void> {
    const todo = [...new Set(queues)];
    try {
      for (let rounds = 0; todo.length > 0 && rounds < 1_000; rounds++) {
        const queue = todo.shift()!;
        const k = this.host.keys(queue);
        const entries = await this.host.connection.call('LRANGE (outbox)', (c) =>
          (c as Redis).lrange(k.outbox, 0, MAX_QUEUE_BATCH - 1),
        );
        const byParent = new Map<string, string[]>();
        for (const e of entries) {
          const parent = (JSON.parse(e) as { q: string }).q;
          const list = byParent.get(parent);
          if (list) list.push(e);
          else byParent.set(parent, [e]);
        }
        for (const [parent, list] of byParent) {
          const p = this.host.keys(parent);
          const shared = !this.host.connection.isCluster || slotTag(parent) === slotTag(queue);
          const pushed = await this.host.connection.run(
            QUEUE_SCRIPTS.flowApply,
            shared ? [k.outbox, ...flowGroupKeys(p)] : flowGroupKeys(p),
            [shared ? '1' : '0', this.host.defaults.eventsMaxLen, ...list],
          );
          if (!shared) {
            for (const e of list) {
              await this.host.connection.call('LREM (outbox)', (c) =>
                (c as Redis).lrem(k.outbox, 1, e),
              );
            }
          }
          if (Number(pushed) > 0 && !todo.includes(parent)) todo.push(parent);
        }
        if (entries.length === MAX_QUEUE_BATCH) todo.push(queue);
      }
    } catch (err) {
      // Left in the outbox: the next claim of that queue reports it and applies it.
      this.warning.warn(
        `applying flow outcomes to their parents failed (retried at the next claim): ${(err as Error).message}`,
      );
    }
  }

  /** A parent's flow record: its children and their outcomes so far. */
  async record(k: QueueRedisKeys, id: string): Promise<FlowRecord | undefined> {
    const [json, outcomes] = await this.host.connection.call('HGET (flow)', async (c) => {
      const r = c as Redis;
      const v = await r.hget(k.flow, id);
      const f = parseFlowRecord(v);
      if (!f || f.outcomes) return [v, undefined] as const;
      // Still waiting: the outcomes so far are in cdone.
      const names = f.children.map((ch) => `${ch.queue}:${ch.id}`);
      const got =
        names.length > 0 ? await r.hmget(k.cdone, ...names.map((n) => `${id}\0${n}`)) : [];
      const o: Record<string, string> = {};
      got.forEach((x, i) => {
        if (x !== null) o[names[i]] = x;
      });
      return [v, o] as const;
    });
    const f = parseFlowRecord(json);
    return f && outcomes ? { ...f, outcomes } : f;
  }

  /** The results of a parent's completed children (`task.childResults()`). */
  async childResults(task: LeasedTask): Promise<Record<string, unknown>> {
    const f = await this.record(this.host.keys(task.queue), task.id);
    return f ? childResultsOf(f.outcomes ?? {}) : {};
  }

  /** A parent's failed children (`task.childFailures()`). */
  async childFailures(task: LeasedTask): Promise<ChildFailure[]> {
    const f = await this.record(this.host.keys(task.queue), task.id);
    return f ? childFailuresOf(f.children, f.outcomes ?? {}) : [];
  }

  /**
   * The children counts of a parent (`get`); while it waits, the children without an outcome
   * that are not in their queue are named as missing.
   */
  async children(
    k: QueueRedisKeys,
    id: string,
    waiting: boolean,
  ): Promise<TaskChildren | undefined> {
    const f = await this.record(k, id);
    if (!f) return undefined;
    const outcomes = f.outcomes ?? {};
    const unfinished = waiting
      ? f.children.filter((c) => outcomes[`${c.queue}:${c.id}`] === undefined)
      : [];
    // One HEXISTS per child still awaited, sent together (each child's queue may be elsewhere).
    const found = await Promise.all(
      unfinished.map((c) =>
        this.host.connection.call('HEXISTS (info)', (r) =>
          (r as Redis).hexists(this.host.keys(c.queue).info, c.id),
        ),
      ),
    );
    const missing = unfinished.filter((_, i) => found[i] === 0).map((c) => `${c.queue}:${c.id}`);
    return childCounts(f.children.length, outcomes, missing);
  }

  /**
   * After a task was cancelled or removed: its parent (if any) learns it through the outbox, and
   * its unfinished children (when it is a parent, `record` read before) are cancelled.
   */
  async ended(k: QueueRedisKeys, record: FlowRecord | undefined, reason: string): Promise<void> {
    await this.applyOutboxes([k.name]);
    for (const c of record?.children ?? []) {
      if (record?.outcomes?.[`${c.queue}:${c.id}`] !== undefined) continue;
      await this.host.cancel(this.host.keys(c.queue), c.id, reason);
    }
  }
}
