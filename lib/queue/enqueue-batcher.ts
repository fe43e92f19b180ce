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

/** Runs one merged call (two or more segments). */
export type RunSegments = (segments: readonly EnqueueSegment[]) => Promise<SegmentOutcome[]>;

/** Runs one call alone (a batch of one is sent as a plain call, without segments). */
export type RunAlone = (segment: EnqueueSegment) => Promise<number>;

/** Ids in one merged call at most (a larger batch goes out as several calls). */
export const MAX_MERGED_IDS = 1_000;
/** Payload characters in one merged call at most (past it, the next call starts a new one). */
export const MAX_MERGED_PAYLOAD = 1 << 20;

interface Waiting {
  readonly segment: EnqueueSegment;
  readonly resolve: (outcome: SegmentOutcome) => void;
  readonly reject: (err: unknown) => void;
}

interface Batch {
  /** What its calls share (options, replica wait): a call with another goes in a new batch. */
  readonly shared: string;
  readonly calls: Waiting[];
  /** Sent (when full, before its tick ended): the tick's send finds nothing to do. */
  sent: boolean;
  ids: number;
  payload: number;
  readonly alone: RunAlone;
  readonly merged: RunSegments;
}

/**
 * One open batch per queue, so that calls reach Redis in the order they were made: a call with
 * other options, or one that cannot be merged (`sendNow` first), sends the open batch before it.
 */
export class EnqueueBatcher {
  private readonly open = new Map<string, Batch>();

  /**
   * Adds `segment` to the open batch of `queue` (its calls share the options `shared` stands
   * for), sent at the end of this tick. Resolves with this segment's outcome.
   */
  add(
    queue: string,
    shared: string,
    segment: EnqueueSegment,
    alone: RunAlone,
    merged: RunSegments,
  ): Promise<SegmentOutcome> {
    return new Promise<SegmentOutcome>((resolve, reject) => {
      let batch = this.open.get(queue);
      const size = segment.payload?.length ?? 0;
      if (
        batch &&
        (batch.shared !== shared ||
          batch.ids + segment.ids.length > MAX_MERGED_IDS ||
          batch.payload + size > MAX_MERGED_PAYLOAD)
      ) {
        this.send(queue, batch);
        batch = undefined;
      }
      if (!batch) {
        const created: Batch = {
          shared,
          calls: [],
          sent: false,
          ids: 0,
          payload: 0,
          alone,
          merged,
        };
        this.open.set(queue, created);
        process.nextTick(() => this.send(queue, created));
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

  private send(queue: string, batch: Batch): void {
    if (this.open.get(queue) === batch) this.open.delete(queue);
    if (batch.sent) return;
    batch.sent = true;
    const { calls } = batch;
    if (calls.length === 1) {
      const [call] = calls;
      batch.alone(call.segment).then((added) => call.resolve({ added }), call.reject);
      return;
    }
    batch.merged(calls.map((c) => c.segment)).then(
      (outcomes) => calls.forEach((c, i) => c.resolve(outcomes[i])),
      (err: unknown) => calls.forEach((c) => c.reject(err)),
    );
  }
}
