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
