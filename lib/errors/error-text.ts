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
