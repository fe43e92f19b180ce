import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  Global,
  Injectable,
  Logger,
  Module,
  type OnApplicationShutdown,
  type OnModuleInit,
  Optional,
} from '@nestjs/common';
import type { PGlite } from '@electric-sql/pglite';
import type { Pool } from 'pg';
import { redactDatabaseUrl, SampleConfig } from '../config/sample-config';
import { DatabaseUnreachableError } from './database.errors';
import { EmbeddedDatabaseClaim } from './embedded-database-claim';

/** The one schema of both engines (table `orders`), applied at start. */
const SCHEMA_SQL = readFileSync(join(__dirname, 'orders.schema.sql'), 'utf8');
/** How long a connection to `DATABASE_URL` may take (at start: then the app fails). */
const CONNECT_TIMEOUT_MS = 5_000;
/** Bound of every statement, so that a database that hangs fails the task (which retries). */
const STATEMENT_TIMEOUT_MS = 5_000;
/** The advisory lock under which an instance applies the schema (any constant of the sample's). */
const SCHEMA_LOCK_KEY = 7_350_001;

/** Values a query binds to `$1`, `$2`, … */
export type SqlParam = string | number | Date | null | string[];

/**
 * The sample's PostgreSQL: through `pg` (a pool of 10) when `DATABASE_URL` is set, else an
 * embedded one (`@electric-sql/pglite`: PostgreSQL compiled to WebAssembly, in memory, in this
 * process). The same SQL runs on both, and `orders.schema.sql` is applied when the database
 * opens. With `DATABASE_URL`, `onModuleInit` connects: a database out of reach fails the start
 * with `DatabaseUnreachableError`, naming `DATABASE_URL` with its password hidden. The embedded
 * one opens on the first query (`ready()`).
 */
@Injectable()
export class OrdersDatabase implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('OrdersDatabase');
  private pool?: Pool;
  /** The embedded engine, started by the first query. */
  private opening?: Promise<PGlite>;
  private lastErrorLog = 0;

  constructor(
    private readonly config: SampleConfig,
    /** Always provided by `OrdersDatabaseModule`; absent only for a database made by hand. */
    @Optional() private readonly claim?: EmbeddedDatabaseClaim,
  ) {}

  /** `'embedded'` or `DATABASE_URL` with its password hidden. */
  get description(): string {
    const url = this.config.databaseUrl;
    return url ? redactDatabaseUrl(url) : 'embedded PostgreSQL (pglite, in memory)';
  }

  async onModuleInit(): Promise<void> {
    const url = this.config.databaseUrl;
    if (url) {
      // Loaded here, so that an app on the embedded engine never loads `pg` (and vice versa).
      const { Pool } = await import('pg');
      this.pool = new Pool({
        connectionString: url,
        max: 10,
        connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
        statement_timeout: STATEMENT_TIMEOUT_MS,
        query_timeout: STATEMENT_TIMEOUT_MS,
      });
      // An idle connection that breaks (the server restarts) must not crash the process.
      this.pool.on('error', (err) => this.warn(err));
      try {
        await this.applySchema(this.pool);
      } catch (err) {
        await this.pool.end().catch(() => undefined);
        this.pool = undefined;
        throw new DatabaseUnreachableError(redactDatabaseUrl(url), err);
      }
    }
  }

  /** Resolves once the database answers (opens the embedded one). */
  async ready(): Promise<void> {
    await this.query('SELECT 1');
  }

  /**
   * Runs one statement and resolves with its rows.
   * @example
   * const rows = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM orders WHERE sku = $1', [sku]);
   */
  async query<T>(sql: string, params: readonly SqlParam[] = []): Promise<T[]> {
    if (this.pool) return (await this.pool.query(sql, params as SqlParam[])).rows as T[];
    if (!this.config.databaseUrl) {
      // Started by the first query (`npm run sample` sends one before it says it listens), so
      // that an app that never writes an order never loads the WebAssembly engine.
      this.opening ??= this.openEmbedded();
      return (await (await this.opening).query<T>(sql, params as SqlParam[])).rows;
    }
    throw new Error('OrdersDatabase is not open (onModuleInit has not run)');
  }

  async onApplicationShutdown(): Promise<void> {
    const pool = this.pool;
    const opening = this.opening;
    this.pool = undefined;
    this.opening = undefined;
    await pool?.end().catch(() => undefined);
    await opening?.then((db) => db.close()).catch(() => undefined);
  }

  /**
   * Two instances starting at once both run `CREATE TABLE IF NOT EXISTS`, and PostgreSQL may refuse
   * the second (`relation "orders" already exists`, or a unique violation on its catalog): the
   * schema is applied under a transaction-scoped advisory lock, so the instances take turns.
   */
  private async applySchema(pool: Pool): Promise<void> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK_KEY]);
      await client.query(SCHEMA_SQL);
      await client.query('COMMIT');
      client.release();
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      // A connection that failed mid-transaction is closed rather than reused.
      client.release(err as Error);
      throw err;
    }
  }

  /**
   * Starts the embedded engine (in memory), takes the embedded database's claim
   * (`EmbeddedDatabaseClaim`), then applies the schema. The engine starts first: its start blocks
   * the event loop for seconds (2.3–2.7 s measured on 2 cores, far more on a loaded machine),
   * and a claim taken before it could not be extended meanwhile and lapsed, letting a second
   * instance in.
   */
  private async openEmbedded(): Promise<PGlite> {
    const { PGlite } = await import('@electric-sql/pglite');
    const db = await PGlite.create();
    try {
      await this.claim?.take();
    } catch (err) {
      await db.close();
      throw err;
    }
    await db.exec(SCHEMA_SQL);
    return db;
  }

  private warn(err: Error): void {
    // One line per 5 s at most: a database that is down fails every connection.
    if (Date.now() - this.lastErrorLog < 5_000) return;
    this.lastErrorLog = Date.now();
    this.logger.warn(`${this.description}: ${err.message}`);
  }
}

/**
 * Provides `OrdersDatabase` to every module of the sample; on the embedded database, refuses to
 * start beside another instance on the same Redis (`EmbeddedDatabaseClaim`).
 */
@Global()
@Module({ providers: [OrdersDatabase, EmbeddedDatabaseClaim], exports: [OrdersDatabase] })
export class OrdersDatabaseModule {}
