import { QueueError } from './queue.error';

/**
 * `enqueueFlow` refused a flow before writing any of it: a node is malformed, appears twice (the
 * same `queue:id`, or the same node object inside itself: a cycle), the tree has more than
 * `MAX_FLOW_NODES` nodes, or a node's task exists already in its queue.
 */
export class FlowError extends QueueError {
  constructor(
    /** The node concerned: its `'queue:id'` when it has one, else its path (`root.children[2]`). */
    readonly node: string,
    problem: string,
    argument?: string,
  ) {
    super(`flow node ${node}: ${problem}`, argument);
  }
}
