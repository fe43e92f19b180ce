// This instance's lock cohorts (lock-cohort.ts is one cohort): which cohort a single-key
// acquisition joins, the heartbeat that keeps their places in Redis lines, and their shutdown.
import { LineRenewal } from '../waiting/line-renewal';
import { LockCohort, type CohortHost } from './lock-cohort';
import type { LockRedisKeys } from './lock-keys';
import { LINE_RENEW_MS } from './lock-store';

/** What the cohorts need from the service, besides what `LockCohorts` provides itself. */
export type CohortServices = Omit<CohortHost, 'renewal' | 'dispose'>;

/** The cohorts of one `LockService`, by lock. */
export class LockCohorts {
  /** Local cohorts by lock value key (single-key locks with `maxLocalHandoffs > 0`). */
  private readonly byKey = new Map<string, LockCohort>();
  /** Every cohort with a caller holding or waiting (shared or a caller's own), for shutdown. */
  private readonly live = new Set<LockCohort>();
  private readonly renewal: CohortHost['renewal'];
  private readonly host: CohortHost;

  constructor(services: CohortServices) {
    this.renewal = new LineRenewal(
      (entries) => services.store.renew(entries),
      LINE_RENEW_MS,
      (err) => services.warn('renewing places in lock lines failed', err),
    );
    this.host = {
      ...services,
      renewal: this.renewal,
      dispose: (cohort) => {
        this.live.delete(cohort);
        if (this.byKey.get(cohort.key.value) === cohort) this.byKey.delete(cohort.key.value);
      },
    };
  }

  /** The cohort a single-key acquisition joins: shared per key, or its own with cohorts off. */
  of(key: LockRedisKeys): LockCohort {
    let cohort = this.host.maxLocalHandoffs === 0 ? undefined : this.byKey.get(key.value);
    if (!cohort) {
      cohort = new LockCohort(this.host, key);
      if (this.host.maxLocalHandoffs > 0) this.byKey.set(key.value, cohort);
      this.live.add(cohort);
    }
    return cohort;
  }

  /** Callers of this instance waiting in the shared cohort of `key`. */
  waiting(key: LockRedisKeys): number {
    return this.byKey.get(key.value)?.waiting ?? 0;
  }

  /**
   * Module shutdown: stops the heartbeat, tells every waiting caller `reason` and leaves every
   * line, so that no lock is handed to this instance while it goes away.
   */
  async close(reason: unknown): Promise<void> {
    this.renewal.close();
    await Promise.allSettled([...this.live].map((c) => c.close(reason)));
    this.live.clear();
  }
}
