/** What went wrong, in words the HTTP layer maps to a status (see `SampleErrorFilter`). */
export type SampleErrorKind = 'invalid' | 'not-found' | 'conflict' | 'gone' | 'unavailable';

/**
 * Base of the sample's own errors. Services throw these (never an `HttpException`); the
 * `SampleErrorFilter` answers them with a status from their `kind` and a JSON body made of the
 * message and the `details`.
 */
export abstract class SampleError extends Error {
  abstract readonly kind: SampleErrorKind;

  constructor(
    message: string,
    /** Fields added to the JSON body, e.g. `{ sku: 'phone' }`. */
    readonly details: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * A request body or path parameter that is not what the endpoint takes (HTTP 400).
 * @example
 * throw new InvalidInputError('stock', -1, 'an integer from 0 to 1000000');
 */
export class InvalidInputError extends SampleError {
  readonly kind = 'invalid';

  constructor(
    readonly field: string,
    value: unknown,
    expected: string,
  ) {
    super(`${field} must be ${expected}, got ${describe(value)}`, { field });
  }
}

/** At most this many characters of a value go into a message. */
const SHOWN_CHARS = 80;

/**
 * The value as the client sent it, cut to `SHOWN_CHARS`; never throws (a body nested thousands
 * deep overflows `JSON.stringify`'s stack: it is described, not shown).
 */
function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'string') return `'${cut(value)}'`;
  try {
    return cut(JSON.stringify(value) ?? typeof value);
  } catch {
    return Array.isArray(value)
      ? 'an array nested too deeply to show'
      : 'a value that cannot be shown';
  }
}

function cut(text: string): string {
  return text.length > SHOWN_CHARS ? `${text.slice(0, SHOWN_CHARS)}…` : text;
}
