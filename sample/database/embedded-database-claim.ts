import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { LockService, LockTimeoutError } from '../../lib';
import { SampleConfig } from '../config/sample-config';
import { EmbeddedDatabaseSharedError } from './database.errors';

/** The lock an instance on the embedded database holds for as long as it runs. */
const CLAIM_KEY = 'sample:embedded-orders-database';
const CLAIM_TTL_MS = 10_000;

/**
 * Taken when the embedded database opens (no `DATABASE_URL`; `npm run sample` opens it before it
 * listens), once its engine has started (that start blocks the event loop for seconds), and held
 * for the app's whole life, so that a second instance on the same Redis and key prefix fails
 * with `EmbeddedDatabaseSharedError` instead of silently keeping half of the orders in a database
 * of its own. `withLock` extends the lock while the app runs; a crashed instance's
 * claim lapses after `CLAIM_TTL_MS`. An app that never writes an order never takes it.
 */
@Injectable()
export class EmbeddedDatabaseClaim implements OnApplicationShutdown {
  private readonly logger = new Logger('OrdersDatabase');
  private taking?: Promise<void>;
  private holding?: Promise<void>;
  private release?: () => void;

  constructor(
    private readonly config: SampleConfig,
    private readonly locks: LockService,
  ) {}

  /** Takes the claim (once); rejects with `EmbeddedDatabaseSharedError` when another holds it. */
  take(): Promise<void> {
    this.taking ??= this.claim();
    return this.taking;
  }

  private async claim(): Promise<void> {
    let taken!: () => void;
    const claimed = new Promise<void>((resolve) => (taken = resolve));
    this.holding = this.locks.withLock(
      CLAIM_KEY,
      (lock) => {
        taken();
        lock.signal.addEventListener('abort', () =>
          this.logger.warn('lost the embedded database claim (Redis out of reach?)'),
        );
        return new Promise<void>((resolve) => (this.release = resolve));
      },
      { ttlMs: CLAIM_TTL_MS, waitMs: 0 },
    );
    try {
      await Promise.race([claimed, this.holding]);
    } catch (err) {
      this.holding = undefined;
      throw err instanceof LockTimeoutError
        ? new EmbeddedDatabaseSharedError(this.config.keyPrefix)
        : err;
    }
  }

  async onApplicationShutdown(): Promise<void> {
    this.release?.();
    await this.holding?.catch(() => undefined);
  }
}
