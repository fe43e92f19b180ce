/**
 * A reply of the in-memory Redis, as RESP2 would carry it: an integer (`number`), a bulk string
 * (`string`), a nil (`null`), an array, a status (`MemoryStatus`) or an error (`MemoryReplyError`).
 */
export type MemoryReply = number | string | null | MemoryStatus | MemoryReplyError | MemoryReply[];

/** A status reply (`+OK`). */
export class MemoryStatus {
  constructor(readonly status: string) {}
}

/** The `+OK` status reply. */
export const OK = new MemoryStatus('OK');

/**
 * An error reply, e.g. `WRONGTYPE …` or `NOSCRIPT …`, with the message Redis sends. Named as
 * ioredis names the errors it reads from Redis.
 */
export class MemoryReplyError extends Error {
  override name = 'ReplyError';
}

/** A command error: `ERR` and the detail. */
export function commandError(detail: string): MemoryReplyError {
  return new MemoryReplyError(`ERR ${detail}`);
}

/** The error of a command on a key of another type. */
export const wrongType = () =>
  new MemoryReplyError('WRONGTYPE Operation against a key holding the wrong kind of value');

/** Redis's text of a double (scores, INCRBYFLOAT): shortest round trip, `inf`/`-inf`. */
export function formatDouble(n: number): string {
  if (n === Infinity) return 'inf';
  if (n === -Infinity) return '-inf';
  return String(n);
}
