import { MAX_QUEUE_BATCH } from './queue.constants';
import { nextTick } from '../redis/unfaked-ticks';

/**
 * Merges the plain enqueue calls one process makes to one queue in the same tick into one
 * `enqueue.lua` call with a segment per call (its ids and payload): 50 producers awaiting their
 * enqueues in a loop then cost Redis one script run per tick instead of 50, and this process one
 * command to write. Each call keeps its own outcome (its count of ids added, or its own
 * `QueueFullError`: the script checks the bound per segment, in order, all or nothing for each).
 * The lock's `coalesceWrites` does the same for socket writes; this goes one step further because
 * the calls share their script.
 */

/** One caller's part of a merged call. */
export interface EnqueueSegment {
  readonly ids: readonly string[];
  /** The stored payload field; undefined: none. */
  readonly payload?: string;
}

/** Per segment, in order: the number of ids added, or the bound it would have passed. */
export type SegmentOutcome = { added: number } | { size: number; maxSize: number };

/** Payload characters in one merged call at most (past it, the next call starts a new one). */
export const MAX_MERGED_PAYLOAD = 1 << 20;

interface Waiting {
  readonly segment: EnqueueSegment;
  readonly resolve: (outcome: SegmentOutcome) => void;
  readonly reject: (err: unknown) => void;
}

interface Batch<O> {
  /** What its calls share (queue, options, replica wait): `send` gets it with the segments. */
  readonly shared: O;
  /** `shared` as a string: a call with another goes in a new batch. */
  readonly sharedKey: string;
  readonly calls: Waiting[];
  /** Sent (when full, before its tick ended): the tick's send finds nothing to do. */
  sent: boolean;
  ids: number;
  payload: number;
}

/**
 * One open batch per queue, so that calls reach Redis in the order they were made: a call with
 * other options, or one that cannot be merged (`sendNow` first), sends the open batch before it.
 * A batch holds at most `MAX_QUEUE_BATCH` ids (what one call may pass) and `MAX_MERGED_PAYLOAD`
 * payload characters.
 * @param run sends one batch (one or more segments, in order) and resolves with their outcomes
 */
export class EnqueueBatcher<O> {
  private readonly open = new Map<string, Batch<O>>();

  constructor(
    private readonly run: (
      shared: O,
      segments: readonly EnqueueSegment[],
    ) => Promise<SegmentOutcome[]>,
  ) {}

  /**
   * Adds `segment` to the open batch of `queue` (its calls share `shared`, told apart by
   * `sharedKey`), sent at the end of this tick. Resolves with this segment's outcome.
   */
  add(
    queue: string,
    sharedKey: string,
    shared: O,
    segment: EnqueueSegment,
  ): Promise<SegmentOutcome> {
    return new Promise<SegmentOutcome>((resolve, reject) => {
      let batch = this.open.get(queue);
      const size = segment.payload?.length ?? 0;
      if (
        batch &&
        (batch.sharedKey !== sharedKey ||
          batch.ids + segment.ids.length > MAX_QUEUE_BATCH ||
          batch.payload + size > MAX_MERGED_PAYLOAD)
      ) {
        this.send(queue, batch);
        batch = undefined;
      }
      if (!batch) {
        const created: Batch<O> = { shared, sharedKey, calls: [], sent: false, ids: 0, payload: 0 };
        this.open.set(queue, created);
        nextTick(() => this.send(queue, created));
        batch = created;
      }
      batch.calls.push({ segment, resolve, reject });
      batch.ids += segment.ids.length;
      batch.payload += size;
    });
  }

  /** Sends the open batch of `queue` now (before a call on it that is not merged). */
  sendNow(queue: string): void {
    const batch = this.open.get(queue);
    if (batch) this.send(queue, batch);
  }

  private send(queue: string, batch: Batch<O>): void {
    if (this.open.get(queue) === batch) this.open.delete(queue);
    if (batch.sent) return;
    batch.sent = true;
    const { calls } = batch;
    this.run(
      batch.shared,
      calls.map((c) => c.segment),
    ).then(
      (outcomes) => calls.forEach((c, i) => c.resolve(outcomes[i])),
      (err: unknown) => calls.forEach((c) => c.reject(err)),
    );
  }
}
