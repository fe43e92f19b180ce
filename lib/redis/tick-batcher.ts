import { nextTick } from './unfaked-ticks';

/**
 * Merges the calls one process makes in the same tick into one Redis call per group (e.g. per
 * Cluster slot): many concurrent callers then cost Redis one script run and this process one
 * command instead of one each. A caller waits for nothing more than its own call would (the batch
 * leaves at the end of the tick it was opened in), and keeps its own outcome: `send` answers one
 * outcome per item, in order, and an `Error` among them rejects that caller alone.
 *
 * A batch holds at most `maxItems` items and `maxWeight` weight (e.g. the units a script writes),
 * so one script run stays short; an item heavier than `maxWeight` goes alone.
 */
export class TickBatcher<I, O> {
  private readonly open = new Map<string, Batch<I, O>>();

  /**
   * @param send sends one batch (its items in the order they were added) and resolves with one
   *   outcome per item, or rejects (then every caller of the batch is rejected with that error)
   */
  constructor(
    private readonly send: (items: I[]) => Promise<(O | Error)[]>,
    private readonly maxItems: number,
    private readonly maxWeight: number,
  ) {}

  /** Adds `item` to the open batch of `group`, sent at the end of this tick; resolves with its outcome. */
  add(group: string, item: I, weight: number): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      let batch = this.open.get(group);
      if (
        batch &&
        (batch.items.length >= this.maxItems || batch.weight + weight > this.maxWeight)
      ) {
        this.flush(group, batch);
        batch = undefined;
      }
      if (!batch) {
        const created: Batch<I, O> = { items: [], callers: [], weight: 0, sent: false };
        this.open.set(group, created);
        nextTick(() => this.flush(group, created));
        batch = created;
      }
      batch.items.push(item);
      batch.callers.push({ resolve, reject });
      batch.weight += weight;
    });
  }

  private flush(group: string, batch: Batch<I, O>): void {
    if (this.open.get(group) === batch) this.open.delete(group);
    if (batch.sent) return;
    batch.sent = true;
    const { callers } = batch;
    this.send(batch.items).then(
      (outcomes) =>
        callers.forEach(({ resolve, reject }, i) => {
          const outcome = outcomes[i];
          if (outcome instanceof Error) reject(outcome);
          else resolve(outcome);
        }),
      (err: unknown) => callers.forEach(({ reject }) => reject(err)),
    );
  }
}

interface Batch<I, O> {
  readonly items: I[];
  readonly callers: { resolve: (outcome: O) => void; reject: (err: unknown) => void }[];
  weight: number;
  /** Sent (when full, before its tick ended): the tick's flush finds nothing to do. */
  sent: boolean;
}
