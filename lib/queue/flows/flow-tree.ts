import { describeValue } from '../../errors/describe-value';
import { FlowError } from '../../errors/flow.error';
import { QueueError } from '../../errors/queue.error';
import type { RedisLockError } from '../../errors/redis-lock.error';
import { QUEUE_DEFAULTS, type ResolvedQueueDefaults } from '../../options/resolve-options';
import type { FlowNode, FlowTaskIds, OnChildFailure } from '../interfaces/flow.interface';
import {
  checkOptionKeys,
  checkPayloadBytes,
  checkTaskId,
  serializePayload,
} from '../queue-arguments';
import { checkQueueName } from '../queue-keys';
import { storedOwnOptions } from '../queue-replies';
import { checkOwnOptions } from '../enqueue-options';
import { MAX_FLOW_NODES } from '../queue.constants';

/** One task of a checked flow, ready to be written (add-flow.lua). */
export interface PlannedNode {
  readonly queue: string;
  readonly id: string;
  /** `'queue:id'`: how results and failures name it. */
  readonly name: string;
  /** 0 for the root, +1 per level. */
  readonly depth: number;
  /** The stored payload field; undefined: none. */
  readonly payload?: string;
  /** `storedOwnOptions`; '' for none. */
  readonly opts: string;
  /** Its parent (undefined for the root) and what that parent does when this node fails. */
  readonly parent?: { readonly queue: string; readonly id: string; readonly mode: OnChildFailure };
  /** Its children, in order. */
  readonly children: readonly { readonly queue: string; readonly id: string }[];
}

/** A checked flow: its nodes, parents before children, and the ids `enqueueFlow` returns. */
export interface FlowPlan {
  readonly nodes: readonly PlannedNode[];
  readonly ids: FlowTaskIds;
}

const NODE_KEYS = ['queue', 'id', 'payload', 'options', 'children'];
const NODE_OPTIONS = [
  'name',
  'maxAttempts',
  'backoff',
  'timeoutMs',
  'expiresInMs',
  'expiresAt',
  'onChildFailure',
];
const MODES: readonly OnChildFailure[] = ['fail-parent', 'ignore', 'wait'];

/**
 * Checks a whole flow before anything is written: every node an object with a valid queue name
 * and id, known keys and valid options; no `queue:id` twice and no node object inside itself; at
 * most `MAX_FLOW_NODES` nodes. Throws a `FlowError` naming the node (its `'queue:id'`, or its path
 * while it has none), or a `PayloadTooLargeError` naming it when its payload is past the
 * `maxPayloadBytes` of its queue (`limits`: the module's queue options, default the defaults).
 */
export function planFlow(
  root: unknown,
  limits: Pick<ResolvedQueueDefaults, 'maxPayloadBytes' | 'queues'> = QUEUE_DEFAULTS,
): FlowPlan {
  const nodes: PlannedNode[] = [];
  const seenNames = new Set<string>();
  const seenObjects = new Set<object>();
  const rootIds: { queue: string; id: string; children?: FlowTaskIds[] }[] = [];
  // Breadth first, so that parents come before their children and depth rises.
  let level: {
    node: unknown;
    path: string;
    parent?: PlannedNode;
    out: (ids: FlowTaskIds) => void;
  }[] = [{ node: root, path: 'root', out: (ids) => rootIds.push(ids) }];
  for (let depth = 0; level.length > 0; depth++) {
    const next: typeof level = [];
    for (const { node, path, parent, out } of level) {
      if (nodes.length >= MAX_FLOW_NODES) {
        throw new FlowError(
          path,
          `the flow has more than ${MAX_FLOW_NODES} nodes (MAX_FLOW_NODES)`,
        );
      }
      if (node === null || typeof node !== 'object' || Array.isArray(node)) {
        throw new FlowError(
          path,
          `expected an object { queue, id, ... }, got ${describeValue(node)}`,
        );
      }
      if (seenObjects.has(node)) {
        throw new FlowError(path, 'the same node object appears twice (a cycle?)');
      }
      seenObjects.add(node);
      const n = node as Partial<FlowNode>;
      const queue = naming(path, 'queue', () => checkQueueName(n.queue));
      const id = naming(path, 'id', () => checkFlowTaskId(n.id));
      const name = `${queue}:${id}`;
      const label = `'${name}'`;
      naming(label, 'node', () => checkOptionKeys(node, NODE_KEYS));
      if (seenNames.has(name)) throw new FlowError(label, 'appears twice in the flow', 'id');
      seenNames.add(name);
      const o = naming(label, 'options', () => checkOptionKeys(n.options, NODE_OPTIONS));
      const mode = (o.onChildFailure ?? 'fail-parent') as OnChildFailure;
      if (!MODES.includes(mode)) {
        throw new FlowError(
          label,
          `invalid option 'onChildFailure': expected one of '${MODES.join("', '")}', got ${describeValue(o.onChildFailure)}`,
          'onChildFailure',
        );
      }
      const opts = naming(label, 'options', () => storedOwnOptions(checkOwnOptions(o)));
      const payload = naming(label, 'payload', () => serializePayload(n.payload));
      if (payload !== undefined) {
        checkPayloadBytes(limits, queue, 'payload', payload, `flow node ${label}`);
      }
      const kids = n.children ?? [];
      if (!Array.isArray(kids)) {
        throw new FlowError(label, `'children' must be an array, got ${describeValue(kids)}`);
      }
      const children: { queue: string; id: string }[] = [];
      const planned: PlannedNode = {
        queue,
        id,
        name,
        depth,
        opts,
        children,
        ...(payload === undefined ? {} : { payload }),
        ...(parent ? { parent: { queue: parent.queue, id: parent.id, mode } } : {}),
      };
      nodes.push(planned);
      if (parent) (parent.children as { queue: string; id: string }[]).push({ queue, id });
      const childIds: FlowTaskIds[] = [];
      out(kids.length > 0 ? { queue, id, children: childIds } : { queue, id });
      kids.forEach((child: unknown, i) =>
        next.push({
          node: child,
          path: `${label}.children[${i}]`,
          parent: planned,
          out: (ids) => childIds.push(ids),
        }),
      );
    }
    level = next;
  }
  return { nodes, ids: rootIds[0] };
}

/**
 * A flow node's id: a task id without NUL. A parent's queue keeps its children's outcomes under
 * `'<parent id> NUL <queue>:<child id>'`; a NUL in an id would let one parent's field name be
 * another parent's, and that parent would wait for its children forever.
 */
function checkFlowTaskId(value: unknown): string {
  const id = checkTaskId(value);
  if (id.includes('\0')) {
    throw QueueError.invalid(
      'id',
      JSON.stringify(id).slice(1, -1),
      "a flow task id without NUL ('\\0' separates a parent's id from its children's names)",
    );
  }
  return id;
}

/** Runs `check`; an error it throws becomes a `FlowError` naming the node. */
function naming<T>(node: string, argument: string, check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (err instanceof FlowError) throw err;
    const e = err as RedisLockError & { argument?: string };
    throw new FlowError(node, e.message, e.argument ?? argument);
  }
}
