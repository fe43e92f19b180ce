/**
 * The database at `DATABASE_URL` could not be reached (or refused the schema) when the app
 * started: the app does not start. The message names `DATABASE_URL` with its password hidden.
 */
export class DatabaseUnreachableError extends Error {
  constructor(
    /** `DATABASE_URL` with its password hidden. */
    readonly url: string,
    cause: unknown,
  ) {
    const c = cause as { message?: string; code?: string; name?: string } | undefined;
    const why = c?.message || c?.code || c?.name || String(cause);
    super(`DATABASE_URL ${url} is unreachable: ${why}`, { cause });
    this.name = 'DatabaseUnreachableError';
  }
}

/**
 * Another instance of the sample on the same Redis and key prefix keeps its orders in an embedded
 * PostgreSQL of its own: this one would keep others, so each sale's orders would be split between
 * two databases. The app does not start.
 */
export class EmbeddedDatabaseSharedError extends Error {
  constructor(keyPrefix: string) {
    super(
      `another sample instance on this Redis (key prefix '${keyPrefix}') keeps its orders in its ` +
        'own embedded PostgreSQL: a second one would split the orders between two databases (and ' +
        'show orders of the other as pending forever). Give every instance the same DATABASE_URL ' +
        '(`npm run sample:load -- --instances N --database postgres` does), or this one a KEY_PREFIX ' +
        'of its own.',
    );
    this.name = 'EmbeddedDatabaseSharedError';
  }
}
