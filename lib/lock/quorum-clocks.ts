/**
 * Quorum mode: what this process knows of each node's clock, so that a node can itself refuse a
 * relock that reaches it too late (`extend-or-relock.lua`).
 *
 * Every reply of `quorum-acquire.lua` and `extend-or-relock.lua` carries the node's Redis `TIME`,
 * read while the script ran, so before the reply arrived here. Paired with the local monotonic
 * time at which the reply arrived, that reading maps any later local moment `L` to a lower bound
 * of the node's clock at `L`:
 *
 *   nodeMs + (1 - clockDriftFactor) × (L - arrivedAt)
 *
 * The node's clock ran at least from its reading to `arrivedAt` too, and runs at no less than
 * `1 - clockDriftFactor` times the local rate (the drift quorum mode already allows for). A node
 * whose clock has not reached that bound is surely before `L`.
 */
export class QuorumClocks {
  /** Per node: the latest reading (node clock ms) and when its reply arrived (local ms). */
  private readonly readings: Array<{ nodeMs: number; arrivedAt: number } | undefined>;

  /**
   * @param nodes how many nodes there are
   * @param clockDriftFactor the largest relative rate difference between this process's clock
   *   and a node's (the module's `clockDriftFactor`)
   */
  constructor(
    nodes: number,
    private readonly clockDriftFactor: number,
  ) {
    this.readings = new Array<undefined>(nodes).fill(undefined);
  }

  /**
   * Records a reply of node `node` that read `nodeMs` on the node's clock and arrived at local
   * time `arrivedAt` (`performance.now()` ms). The latest reply wins: any reply gives a true
   * bound, and the latest one follows a node whose clock was set back.
   */
  observe(node: number, nodeMs: number, arrivedAt: number): void {
    if (Number.isFinite(nodeMs) && nodeMs > 0) this.readings[node] = { nodeMs, arrivedAt };
  }

  /**
   * A time on node `node`'s clock (ms) that the node reaches no later than local time `localMs`
   * (`performance.now()` ms), or `0` when that cannot be told (no reply from the node yet, or
   * `localMs` is before its latest reply arrived).
   */
  before(node: number, localMs: number): number {
    const r = this.readings[node];
    if (!r || localMs <= r.arrivedAt) return 0;
    return Math.floor(r.nodeMs + (1 - this.clockDriftFactor) * (localMs - r.arrivedAt));
  }
}
