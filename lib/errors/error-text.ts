// Text of whatever was thrown: a handler or a listener may throw anything (an object without a
// prototype, one whose `toString` or `message` getter throws), and what reports it must not throw.

/**
 * `value` as text, never throwing: `String(value)`, else its tag (`[object Object]`). A handler
 * may throw anything — an object without prototype, one whose `toString` or `Symbol.toPrimitive`
 * throws — and the worker must still store that failure and nack the task.
 */
export function safeText(value: unknown): string {
  try {
    return String(value);
  } catch {
    try {
      return Object.prototype.toString.call(value);
    } catch {
      return '[unprintable value]';
    }
  }
}

/** `read()` (a property of a thrown value, possibly a getter that throws), or `undefined`. */
export function readSafely(read: () => unknown): unknown {
  try {
    return read();
  } catch {
    return undefined;
  }
}

/** What a failure says: an `Error`'s `message`, else the value as text; never throws. */
export function errorText(err: unknown): string {
  const isError = readSafely(() => err instanceof Error) === true;
  return safeText((isError ? readSafely(() => (err as Error).message) : undefined) ?? err);
}

/**
 * `text` with each lone UTF-16 surrogate (half of a character outside the BMP, e.g. an emoji cut
 * by `slice`) replaced by U+FFFD, as `String.prototype.toWellFormed` does. `JSON.stringify`
 * writes a lone surrogate as an escape (`\ud83d`) that Redis's cjson refuses to decode.
 */
export function wellFormed(text: string): string {
  return text.replace(
    /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g,
    '\uFFFD',
  );
}
