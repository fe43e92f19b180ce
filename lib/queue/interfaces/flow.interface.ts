import type { WaitForReplicasOptions } from '../../interfaces/lock-options.interface';
import type { TaskError } from './queue-event.interface';
import type { BackoffOptions } from '../../interfaces/queue-task.interface';

/**
 * What a parent does when this child fails (ends dead — attempts used up, or
 * `UnrecoverableTaskError` — or is cancelled or removed before it completed):
 * - `'fail-parent'` the parent goes dead at once, with a `FlowChildFailedError` naming the child
 * - `'ignore'` the child counts as finished: the parent runs once every child finished, and
 *   finds this one in `task.childFailures()`
 * - `'wait'` the parent keeps waiting until the child is requeued from the dead letters
 *   (`requeueDead`) and completes
 */
export type OnChildFailure = 'fail-parent' | 'ignore' | 'wait';

/** The options of one node of a flow. */
export interface FlowNodeOptions {
  /** The task's name, routing it to a named handler (as `enqueue`'s `name`). */
  name?: string;
  /** The task's own attempt limit (as `enqueue`'s). */
  maxAttempts?: number;
  /** The task's own retry delays (as `enqueue`'s). */
  backoff?: BackoffOptions;
  /** The task's own run timeout (as `enqueue`'s). */
  timeoutMs?: number;
  /**
   * The task expires unless started within this many ms (as `enqueue`'s). A parent's deadline is
   * checked when it would start (after its children); an expired child counts as failed for its
   * parent (`TaskExpiredError`).
   */
  expiresInMs?: number;
  /** The task's deadline (as `enqueue`'s `expiresAt`). */
  expiresAt?: Date | number;
  /**
   * What this node's parent does when this node fails; ignored on the root.
   * @default 'fail-parent'
   */
  onChildFailure?: OnChildFailure;
}

/**
 * One task of a flow and the tasks it waits for. A node with `children` starts in state
 * `waiting-children` and becomes ready once each child completed; a node without is ready at
 * once. Children may be in any queue, and have children of their own.
 * @example
 * { queue: 'orders', id: 'o-42', children: [
 *   { queue: 'payments', id: 'charge-42', payload: { amount: 990 } },
 *   { queue: 'stock', id: 'reserve-42', payload: { sku: 'A1' } },
 * ] }
 */
export interface FlowNode {
  /** The queue of this task (a `{tag}` in the name decides its Cluster slot, as everywhere). */
  queue: string;
  /** Its id in that queue: a non-empty string or a finite number (stored as its string). */
  id: string | number;
  /** Any JSON value, as `enqueue`'s `payload`. */
  payload?: unknown;
  options?: FlowNodeOptions;
  children?: FlowNode[];
}

/** The tasks `enqueueFlow` added: the tree's queues and ids, in the shape of the tree given. */
export interface FlowTaskIds {
  readonly queue: string;
  /** The task's id (a number id comes back as its string). */
  readonly id: string;
  /** Present when the node had children, in their order. */
  readonly children?: FlowTaskIds[];
}

/** Options of `enqueueFlow`. */
export interface EnqueueFlowOptions {
  /**
   * Waits, after each script that writes the flow, for this many replicas to acknowledge it
   * (`WAIT`), as `enqueue`'s; `false`: none. Unset: the module's `queue.waitForReplicas`.
   */
  waitForReplicas?: WaitForReplicasOptions | false;
}

/** A child that failed, as `task.childFailures()` lists it. */
export interface ChildFailure {
  readonly queue: string;
  readonly id: string;
  /** Its last failure, or the cancel's reason. */
  readonly error: TaskError;
}

/** The children of a flow parent, as `get` reports them. */
export interface TaskChildren {
  /** How many children it has. */
  readonly total: number;
  /** How many completed. */
  readonly completed: number;
  /** How many failed (dead, cancelled, removed). */
  readonly failed: number;
  /**
   * Children not found in their queue while the parent waits for them, as `'queue:id'`: on
   * Cluster, a flow over several slots whose writing was cut short (docs/queue.md, "Flows").
   * Absent when none is missing.
   */
  readonly missing?: string[];
}
