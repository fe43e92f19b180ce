import {
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { LockService, LockTimeoutError } from '../../lib';
import { SampleConfig } from '../config/sample-config';
import { EmbeddedDatabaseSharedError } from './database.errors';

/** The lock an instance on the embedded database holds for as long as it runs. */
const CLAIM_KEY = 'sample:embedded-orders-database';
const CLAIM_TTL_MS = 10_000;

/**
 * On the embedded database (no `DATABASE_URL`), holds a lock for the app's whole life, so that a
 * second instance on the same Redis and key prefix fails to start with
 * `EmbeddedDatabaseSharedError` instead of silently keeping half of the orders in a database of
 * its own. `withLock` extends the lock while the app runs; a crashed instance's claim lapses after
 * `CLAIM_TTL_MS`.
 */
@Injectable()
export class EmbeddedDatabaseClaim implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('OrdersDatabase');
  private holding?: Promise<void>;
  private release?: () => void;

  constructor(
    private readonly config: SampleConfig,
    private readonly locks: LockService,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (this.config.databaseUrl) return;
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
