/**
 * A place in a Redis line that its process keeps alive: `entry()` says what to renew (or
 * `undefined` when it stands in no line right now), `onRenewed` gets what the renewal found.
 */
export interface RenewedPlace<E, S> {
  entry(): E | undefined;
  onRenewed(entry: E, status: S): void;
  /**
   * The renewal failed (Redis unreachable): a place that would rather fail its callers at once
   * than let them wait through an outage says so here (else its entry lapses by its deadline).
   */
  onRenewFailed?(entry: E, err: unknown): void;
}

/**
 * The heartbeat of a process's places in Redis lines: every `periodMs` one `renew` call covers all
 * of them (the store splits it per Cluster slot where it must). Waiting thus costs Redis about one
 * call per second per process, whatever the number of waiting callers; the timer runs only while
 * some place is registered.
 */
export class LineRenewal<E, S> {
  private readonly places = new Set<RenewedPlace<E, S>>();
  private timer?: NodeJS.Timeout;
  private running = false;

  /**
   * @param renew renews the entries; resolves one status per entry, in order
   * @param periodMs time between renewals
   * @param onError told about a failed renewal (the entries lapse by their deadline if it lasts)
   */
  constructor(
    private readonly renew: (entries: E[]) => Promise<S[]>,
    private readonly periodMs: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  add(place: RenewedPlace<E, S>): void {
    this.places.add(place);
    this.schedule();
  }

  delete(place: RenewedPlace<E, S>): void {
    this.places.delete(place);
    if (this.places.size === 0) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** Stops renewing (module shutdown). */
  close(): void {
    this.places.clear();
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    if (this.timer || this.running || this.places.size === 0) return;
    this.timer = setTimeout(() => void this.tick(), this.periodMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    this.timer = undefined;
    this.running = true;
    const places: RenewedPlace<E, S>[] = [];
    const entries: E[] = [];
    for (const place of this.places) {
      const entry = place.entry();
      if (entry === undefined) continue;
      places.push(place);
      entries.push(entry);
    }
    try {
      if (entries.length > 0) {
        const statuses = await this.renew(entries);
        places.forEach((place, i) => {
          if (this.places.has(place)) place.onRenewed(entries[i], statuses[i]);
        });
      }
    } catch (err) {
      this.onError(err);
      places.forEach((place, i) => {
        if (this.places.has(place)) place.onRenewFailed?.(entries[i], err);
      });
    } finally {
      this.running = false;
      this.schedule();
    }
  }
}
