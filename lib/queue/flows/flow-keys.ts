import type { ChildFailure, TaskChildren } from '../interfaces/flow.interface';
import type { QueueRedisKeys } from '../queue-keys';
import { encodeKeyName, hashTagOf } from '../../redis/tagged-key';
import { decodeTaskError } from '../task-errors';
import type { FlowPlan, PlannedNode } from './flow-tree';

/**
 * The hash tag that decides a queue's Cluster slot: the `{tag}` its name has, else the name (its
 * keys are `queue:<encodeKeyName(name)>:...`). Queues with one tag share a slot.
 */
export function slotTag(queue: string): string {
  // encodeKeyName always gives a tag; `?? queue` only satisfies the type.
  return hashTagOf(encodeKeyName(queue)) ?? queue;
}

/**
 * The key base of a queue (`<prefix>queue:<encodeKeyName(name)>`): its keys are this plus
 * `:<part>`.
 */
export function keyBase(k: QueueRedisKeys): string {
  return k.due.slice(0, -':due'.length);
}

/**
 * The keys of a parent's queue that a script advancing it needs, in includes/flow.lua's order
 * (FLOW_GROUP: 12).
 */
export function flowGroupKeys(k: QueueRedisKeys): string[] {
  return [
    k.due,
    k.wake,
    k.events,
    k.dead,
    k.errors,
    k.wchildren,
    k.cdone,
    k.flow,
    k.parents,
    k.outbox,
    k.opts,
    k.expiries,
  ];
}

/** The keys add-flow.lua takes per queue, in its order (15). */
export function addFlowKeys(k: QueueRedisKeys): string[] {
  return [
    k.due,
    k.info,
    k.payload,
    k.opts,
    k.events,
    k.wake,
    k.config,
    k.dead,
    k.done,
    k.cancelled,
    k.wchildren,
    k.flow,
    k.parents,
    k.expired,
    k.expiries,
  ];
}

/**
 * The script calls that write a flow: one when every queue shares a slot (atomic), else one per
 * level and slot, parents' levels first (a parent exists, waiting, before its children do).
 */
export function flowCalls(plan: FlowPlan, oneSlot: boolean): PlannedNode[][] {
  if (oneSlot || new Set(plan.nodes.map((n) => slotTag(n.queue))).size === 1) {
    return [[...plan.nodes]];
  }
  const calls = new Map<string, PlannedNode[]>();
  for (const n of plan.nodes) {
    const key = `${n.depth}\0${slotTag(n.queue)}`;
    let call = calls.get(key);
    if (!call) calls.set(key, (call = []));
    call.push(n);
  }
  // Map order is insertion order, and nodes come level by level.
  return [...calls.values()];
}

/** The KEYS and ARGV of add-flow.lua for `nodes` (`keysOf` gives a queue's keys). */
export function addFlowCall(
  nodes: readonly PlannedNode[],
  keysOf: (queue: string) => QueueRedisKeys,
  eventsMaxLen: number,
  maxSize: number,
  callId: string,
): { keys: string[]; args: (string | number)[]; queues: string[] } {
  const groups = new Map<string, number>();
  const keys: string[] = [];
  const args: (string | number)[] = [eventsMaxLen, maxSize];
  for (const n of nodes) {
    let g = groups.get(n.queue);
    if (g === undefined) {
      g = groups.size + 1;
      groups.set(n.queue, g);
      keys.push(...addFlowKeys(keysOf(n.queue)));
    }
    // Every record carries the call id (`k`, one per enqueueFlow, shared by its calls): a parent's
    // flow record and a child's link to its parent. The link counts only for a parent whose
    // record has the same id (includes/flow.lua `applyChild`): a stale link (a child whose
    // parent no longer waits) cannot advance a later flow's parent that reuses the id. The first
    // node's record also tells a call run twice (add-flow.lua). A flow of one task (a root
    // without children) has neither: its root gets a flow record with no children, which only
    // marks the call (readers take it for no record: `parseFlowRecord`).
    const first = n === nodes[0];
    const leaf = n.children.length === 0;
    const link = n.parent
      ? JSON.stringify({
          q: n.parent.queue,
          p: n.parent.id,
          b: keyBase(keysOf(n.parent.queue)),
          m: n.parent.mode,
          c: n.name,
          k: callId,
        })
      : '';
    const flow =
      !leaf || (first && !n.parent)
        ? JSON.stringify({ c: n.children.map((c) => [c.queue, c.id]), k: callId })
        : '';
    args.push(g, n.id, n.payload ?? '', n.opts, link, flow);
  }
  return { keys, args, queues: [...groups.keys()] };
}

/** A parent's flow record (the `flow` hash): its children and, once it stopped waiting, outcomes. */
export interface FlowRecord {
  children: { queue: string; id: string }[];
  /** `'queue:id'` -> 'c' + result JSON or 'f' + error JSON; undefined while the parent waits. */
  outcomes?: Record<string, string>;
}

/**
 * Parses a stored flow record (undefined when there is none, or when it has no children: the
 * record of a one-task flow's root only marks the call that added it, `addFlowCall`).
 */
export function parseFlowRecord(json: string | null | undefined): FlowRecord | undefined {
  if (!json) return undefined;
  const f = JSON.parse(json) as { c: [string, string][]; r?: Record<string, string> | [] };
  if (f.c.length === 0) return undefined;
  return {
    children: f.c.map(([queue, id]) => ({ queue, id })),
    // cjson writes an empty table as {} — or [] when it was decoded from one: both mean none.
    ...(f.r === undefined ? {} : { outcomes: Array.isArray(f.r) ? {} : f.r }),
  };
}

/** The results of the completed children: `{ 'queue:id': result }`. */
export function childResultsOf(outcomes: Record<string, string>): Record<string, unknown> {
  const results: Record<string, unknown> = {};
  for (const [name, o] of Object.entries(outcomes)) {
    if (o.startsWith('c'))
      results[name] = o.length > 1 ? (JSON.parse(o.slice(1)) as unknown) : undefined;
  }
  return results;
}

/** The failed children, with their errors. */
export function childFailuresOf(
  children: readonly { queue: string; id: string }[],
  outcomes: Record<string, string>,
): ChildFailure[] {
  const failures: ChildFailure[] = [];
  for (const c of children) {
    const o = outcomes[`${c.queue}:${c.id}`];
    if (o?.startsWith('f'))
      failures.push({ queue: c.queue, id: c.id, error: decodeTaskError(o.slice(1)) });
  }
  return failures;
}

/** The counts `get` reports for a parent's children. */
export function childCounts(
  total: number,
  outcomes: Record<string, string>,
  missing: readonly string[],
): TaskChildren {
  let completed = 0;
  let failed = 0;
  for (const o of Object.values(outcomes)) {
    if (o.startsWith('c')) completed++;
    else failed++;
  }
  return { total, completed, failed, ...(missing.length > 0 ? { missing: [...missing] } : {}) };
}
