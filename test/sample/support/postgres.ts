import { Client } from 'pg';
import {
  postgresAvailable,
  startPostgresServer,
  type PostgresServer,
} from '../../../scripts/postgres-server';

/**
 * Whether this machine can start a PostgreSQL (`npm run ensure-postgres` installs it; CI does).
 * Without it the specs that need one are skipped, and say so once.
 */
export const HAVE_POSTGRES = postgresAvailable();
if (!HAVE_POSTGRES) {
  console.warn(
    'PostgreSQL (initdb, postgres) not found: the sample tests on PostgreSQL are SKIPPED. ' +
      "Run 'npm run ensure-postgres' or set POSTGRES_BIN_DIR.",
  );
}

/** `describe` when PostgreSQL can be started here, else `describe.skip`. */
export const describeWithPostgres = HAVE_POSTGRES ? describe : describe.skip;

/** Starts a private PostgreSQL server for one test file (stop it with `destroy()` in afterAll). */
export function startTestPostgres(): Promise<PostgresServer> {
  return startPostgresServer();
}

/** Creates database `name` on `server` and returns its URL. */
export async function createDatabase(server: PostgresServer, name: string): Promise<string> {
  const client = new Client({ connectionString: server.url });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
  return server.url.replace(/\/postgres$/, `/${name}`);
}

/** Runs one query on `url` with a client of its own; resolves with the rows. */
export async function queryRows<T>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as T[];
  } finally {
    await client.end();
  }
}
