import { MAX_QUEUE_BATCH } from './queue.constants';
import { nextTick } from '../redis/unfaked-ticks';

/**
 * Merges the plain enqueue calls one process makes to one queue in the same tick into one
 * `enqueue.lua` call with a segment per call (its ids and payload): 50 producers awaiting their
 * enqueues in a loop then cost Redis one or two script runs per tick instead of 50, and this
 * process as many commands to write. Each call keeps its own outcome (its count of ids added, or
 * its own `QueueFullError`: the script checks the bound per segment, in order, all or nothing for
 * each). The lock's `coalesceWrites` does the same for socket writes; this goes one step further
 * because the calls share their script.
 *
 * Two calls, not one, when nothing of this process's merged enqueues is in flight and the batch
 * holds at least `SPLIT_MIN_IDS` ids: its first half then comes back while Redis still runs the
 * second, so the callers of the first half make their next calls (this process's work) while
 * Redis works for the others. With one call per tick the two took turns, each idle while the
 * other worked; once split, the two halves keep alternating (each is sent while the other is in
 * flight, so it goes whole), and they merge and split again when their replies come back
 * together. The worker's flush keeps two calls in flight for the same reason.
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

/**
 * Ids in a batch from which it goes as two calls when nothing else is in flight: below it, a
 * second script run's fixed cost is about what the overlap saves.
 */
export const SPLIT_MIN_IDS = 8;

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
  /** Merged calls sent and not answered yet, of every queue. */
  private inFlight = 0;

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
    if (this.inFlight === 0 && batch.ids >= SPLIT_MIN_IDS && calls.length > 1) {
      const cut = halfOf(calls, batch.ids);
      this.runCalls(batch.shared, calls.slice(0, cut));
      this.runCalls(batch.shared, calls.slice(cut));
    } else {
      this.runCalls(batch.shared, calls);
    }
  }

  /** Sends `calls` (of one batch, in order) as one script call. */
  private runCalls(shared: O, calls: readonly Waiting[]): void {
    this.inFlight++;
    this.run(
      shared,
      calls.map((c) => c.segment),
    ).then(
      (outcomes) => {
        this.inFlight--;
        calls.forEach((c, i) => c.resolve(outcomes[i]));
      },
      (err: unknown) => {
        this.inFlight--;
        calls.forEach((c) => c.reject(err));
      },
    );
  }
}

/**
 * Where to cut `calls` (more than one, `ids` ids in all) into two: the first half holds the first
 * calls with at most half of the ids, and at least one call; so does the second.
 */
function halfOf(calls: readonly Waiting[], ids: number): number {
  let cut = 0;
  let taken = 0;
  while (cut < calls.length - 1 && taken + calls[cut].segment.ids.length <= ids / 2) {
    taken += calls[cut].segment.ids.length;
    cut++;
  }
  return Math.max(cut, 1);
}
