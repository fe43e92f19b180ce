import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { DashboardBusyError } from '../errors/dashboard-busy.error';
import type { ResolvedDashboardOptions } from './dashboard-options';
import { DASHBOARD_OPTIONS } from './dashboard.constants';
import { DashboardService, type DashboardOverview } from './dashboard.service';

/** Searches whose overview is running, fresh or waiting for its turn, at most. */
export const MAX_OVERVIEW_SEARCHES = 8;

/** An overview computed (or to be computed) for one search. */
interface SharedOverview {
  /** When its computation settled (`performance.now()`); unset while it waits or runs. */
  settledAt?: number;
  overview: Promise<DashboardOverview>;
}

/**
 * Bounds the rate of `DashboardService.overview` (two key scans each) whatever the number of
 * clients polling the page: an overview starts at least `overviewIntervalMs` after the previous
 * one, and is shared, while it runs and until `overviewIntervalMs` after it finished, by every
 * caller with the same search (a slow Redis does not start more of them). Searches that must
 * wait for their turn are bounded too: beyond `MAX_OVERVIEW_SEARCHES`, `DashboardBusyError`.
 */
@Injectable()
export class DashboardOverviewThrottle implements OnModuleDestroy {
  private readonly shared = new Map<string, SharedOverview>();
  /** The earliest start of the next computation (`performance.now()`). */
  private nextStart = 0;
  /** Refusals of the searches waiting for their turn. */
  private readonly waits = new Set<() => void>();

  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly dashboard: DashboardService,
  ) {}

  /**
   * The overview for `search`: a shared one, or one computed at the next free turn.
   * @throws DashboardBusyError when `MAX_OVERVIEW_SEARCHES` other searches hold a turn
   */
  overview(search: string): Promise<DashboardOverview> {
    // A monotonic clock: a wall clock stepped back would keep a stale overview for the length
    // of the step, and make every new search wait that long for its turn.
    const now = performance.now();
    const interval = this.options.overviewIntervalMs;
    for (const [key, entry] of this.shared) {
      if (entry.settledAt !== undefined && entry.settledAt + interval <= now) {
        this.shared.delete(key);
      }
    }
    const hit = this.shared.get(search);
    if (hit) return hit.overview;
    if (this.shared.size >= MAX_OVERVIEW_SEARCHES) {
      const reason =
        `${MAX_OVERVIEW_SEARCHES} other searches hold a turn already, the most allowed ` +
        `(overviews start at least ${interval} ms apart)`;
      return Promise.reject(new DashboardBusyError(search, reason));
    }
    const startsAt = Math.max(now, this.nextStart);
    this.nextStart = startsAt + interval;
    const overview = this.turn(search, startsAt - now).then(() => this.dashboard.overview(search));
    const entry: SharedOverview = { overview };
    const settled = () => void (entry.settledAt = performance.now());
    overview.then(settled, settled);
    this.shared.set(search, entry);
    return overview;
  }

  /**
   * Refuses every waiting search at once (`DashboardBusyError`, `shuttingDown`), so that no
   * request of a closing app waits out its turn, nor then runs on a closing connection.
   */
  onModuleDestroy(): void {
    for (const refuse of this.waits) refuse();
  }

  /** Resolves after `ms` (at once for 0); rejects when the module is destroyed before. */
  private turn(search: string, ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waits.delete(refuse);
        resolve();
      }, ms);
      const refuse = () => {
        clearTimeout(timer);
        this.waits.delete(refuse);
        reject(new DashboardBusyError(search, 'the app is shutting down', true));
      };
      this.waits.add(refuse);
    });
  }
}
