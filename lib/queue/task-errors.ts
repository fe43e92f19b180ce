import { errorText, readSafely, safeText, wellFormed } from '../errors/error-text';
import type { TaskError } from './interfaces/queue-event.interface';
import { redactText } from '../redaction/redact-credentials';

/**
 * The failure an expired task reads as (`waitFor`, bull-board, its flow parent; claim.lua writes
 * the same for the parent).
 */
export const TASK_EXPIRED: TaskError = {
  name: 'TaskExpiredError',
  message: 'expired before it started',
};

/** Longest failure message stored with a task, in characters. */
const MAX_MESSAGE_CHARS = 1_000;
/** Longest stack stored with a task, in characters. */
const MAX_STACK_CHARS = 4_000;
/** Longest error name stored with a task, in characters. */
const MAX_NAME_CHARS = 200;

/**
 * `value` as text without credentials, cut to `max` characters, well-formed (a surrogate left
 * alone, by the thrower or by the cut, would make the JSON one Redis's cjson cannot decode: a flow
 * parent could not read its child's message).
 */
const stored = (value: unknown, max: number) =>
  wellFormed(redactText(safeText(value)).slice(0, max));

/**
 * How a failure is stored (errors hash, event stream): the JSON of `{ name, message, stack? }`,
 * name, message and stack without credentials (`redactText`: they are shown by `get`, the dashboard
 * and queue events), cut to a bounded length, each lone surrogate as U+FFFD. Never throws,
 * whatever was thrown (a getter of `message` or `stack` that throws reads as absent).
 */
export function encodeTaskError(err: unknown): string {
  let e: TaskError;
  if (readSafely(() => err instanceof Error) === true) {
    const error = err as Error;
    const stack = readSafely(() => error.stack);
    e = {
      name: stored(readSafely(() => error.name) ?? 'Error', MAX_NAME_CHARS),
      message: stored(readSafely(() => error.message) ?? '', MAX_MESSAGE_CHARS),
      ...(stack ? { stack: stored(stack, MAX_STACK_CHARS) } : {}),
    };
  } else {
    e = { name: 'Error', message: stored(err, MAX_MESSAGE_CHARS) };
  }
  return JSON.stringify(e);
}

/**
 * What a log line says of a failure (a worker's retry and dead-letter lines): its message
 * (`errorText`) bounded as `encodeTaskError` stores it, without credentials and cut to
 * `MAX_MESSAGE_CHARS`, then its whole length when cut: a handler's error may carry megabytes (an
 * HTTP response body), logged once per attempt. Redacted before the cut, which could split a
 * password that the logger would then not recognise.
 */
export function failureText(err: unknown): string {
  const text = redactText(errorText(err));
  return text.length > MAX_MESSAGE_CHARS
    ? `${wellFormed(text.slice(0, MAX_MESSAGE_CHARS))}… (${text.length} chars)`
    : text;
}

/** A stored failure back as a `TaskError`: JSON from `encodeTaskError`, or a plain message. */
export function decodeTaskError(text: string): TaskError {
  if (text.startsWith('{')) {
    try {
      const e = JSON.parse(text) as Partial<TaskError>;
      if (typeof e.message === 'string') {
        return {
          name: typeof e.name === 'string' ? e.name : 'Error',
          message: e.message,
          ...(typeof e.stack === 'string' ? { stack: e.stack } : {}),
        };
      }
    } catch {
      // not our JSON: the text is the message
    }
  }
  return { name: 'Error', message: text };
}
