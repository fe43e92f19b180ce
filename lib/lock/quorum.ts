import { LockQuorumError } from '../errors/lock-quorum.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import type { RedisLockConnection } from '../redis/redis-connection';
import type { LockRedisKeys } from './lock-keys';
import type { QuorumShortfall } from './lock-store';

/** What one node did with a request sent to all of them. */
export type NodeOutcome<T> =
  | { node: number; state: 'answered'; value: T }
  | { node: number; state: 'failed'; sent: boolean }
  | { node: number; state: 'pending' };

/**
 * Quorum mode: one request sent to every node in parallel, counted against a majority
 * (`floor(N / 2) + 1`).
 */
export class Quorum {
  /** The majority: `floor(nodes / 2) + 1`. */
  readonly needed: number;

  /** @param nodes the independent masters */
  constructor(readonly nodes: readonly RedisLockConnection[]) {
    this.needed = Math.floor(nodes.length / 2) + 1;
  }

  /**
   * Sends `call` to every node in parallel and resolves as soon as the outcome is decided — a
   * quorum said yes, or a quorum answered and yes can no longer win — when every node settled, or
   * when `withinMs` has passed; calls still running then are reported `pending`.
   *
   * A node known to be disconnected counts as failed at once; the call is then not sent, unless
   * `evenIfDisconnected`: a release must still be queued there, because a command that was in
   * flight when the connection broke (e.g. an acquisition) is sent again on reconnect, and the
   * release has to run after it.
   * @param call the request to one node (`index` is its place in `nodes`)
   * @param yes whether a node's answer counts toward the quorum
   */
  gather<T>(
    call: (node: RedisLockConnection, index: number) => Promise<T>,
    yes: (value: T) => boolean,
    withinMs?: number,
    evenIfDisconnected = false,
  ): Promise<NodeOutcome<T>[]> {
    const outcomes: NodeOutcome<T>[] = this.nodes.map((_, node) => ({ node, state: 'pending' }));
    return new Promise((resolve) => {
      let settled = 0;
      let answered = 0;
      let yeses = 0;
      let timer: NodeJS.Timeout | undefined;
      const finish = () => {
        clearTimeout(timer);
        resolve(outcomes.map((o) => ({ ...o })));
      };
      const record = (outcome: NodeOutcome<T>) => {
        outcomes[outcome.node] = outcome;
        settled++;
        if (outcome.state === 'answered') {
          answered++;
          if (yes(outcome.value)) yeses++;
        }
        const noes = settled - yeses;
        if (
          yeses >= this.needed ||
          (noes > this.nodes.length - this.needed && answered >= this.needed) ||
          settled === this.nodes.length
        ) {
          finish();
        }
      };
      if (withinMs !== undefined) timer = setTimeout(finish, withinMs);
      this.nodes.forEach((node, i) => {
        if (node.disconnected) {
          if (evenIfDisconnected) call(node, i).catch(() => undefined);
          record({ node: i, state: 'failed', sent: evenIfDisconnected });
          return;
        }
        call(node, i).then(
          (value) => record({ node: i, state: 'answered', value }),
          (err: unknown) =>
            // A timeout leaves the request on its way; a refusal means it never ran.
            record({ node: i, state: 'failed', sent: err instanceof RedisUnavailableError }),
        );
      });
    });
  }

  /** How many nodes answered and said yes. */
  tally<T>(outcomes: NodeOutcome<T>[], yes: (value: T) => boolean): QuorumShortfall {
    let answered = 0;
    let granted = 0;
    for (const o of outcomes) {
      if (o.state !== 'answered') continue;
      answered++;
      if (yes(o.value)) granted++;
    }
    return { nodes: this.nodes.length, answered, granted, needed: this.needed };
  }

  /**
   * True when a quorum said yes, false when a quorum answered otherwise.
   * @throws LockQuorumError when fewer nodes than a quorum answered (`operation` names it)
   */
  decide<T>(
    keys: readonly LockRedisKeys[],
    operation: string,
    outcomes: NodeOutcome<T>[],
    yes: (value: T) => boolean,
  ): boolean {
    const t = this.tally(outcomes, yes);
    if (t.granted >= this.needed) return true;
    if (t.answered >= this.needed) return false;
    throw new LockQuorumError(
      keys.map((k) => k.name),
      operation,
      t.nodes,
      t.answered,
      t.granted,
      t.needed,
    );
  }
}
