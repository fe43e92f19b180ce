import { types } from 'node:util';

/** What a credential is replaced with. */
export const REDACTED = '***';

/**
 * Shortest configured secret scrubbed wherever it occurs in a text: replacing every `a` of a
 * message for a one-letter password would make it unreadable and protect nothing.
 * @default 4
 */
export const MIN_SCRUBBED_SECRET_LENGTH = 4;

/** Option keys whose string values are credentials (`password`, `sentinelPassword`, TLS `passphrase`). */
const SECRET_KEY = /pass(word|phrase)|secret/i;

/**
 * Whether an option path names a credential by its last part (`password`, `options.password`,
 * `sentinelPassword`): its value is shown as `***` in errors, also where the option is unknown (a
 * password given at the wrong level).
 */
export function isSecretOption(path: string): boolean {
  return SECRET_KEY.test(path.slice(path.lastIndexOf('.') + 1));
}

/**
 * `scheme://user:password@` in a text: the password goes, up to the last `@` before the host (a
 * password may hold an unencoded `@`, which ioredis accepts as the URL parser does), whatever it
 * holds but the `/`, `?` or `#` that ends a URL's authority: the URL parser takes a space or a
 * tab in it too, and such a URL may be refused (for its database, its `?keyPrefix=`) before
 * connecting, while its password is not registered yet.
 */
const URL_PASSWORD = /([a-z][a-z0-9+.-]*:\/\/[^\s/?#@:]*):([^/?#]*)@/gi;

/** `?password=…` / `&sentinelPassword=…` in a URL's query (ioredis reads options from it). */
const QUERY_PASSWORD = /([?&][a-z]*pass(?:word)?=)[^&#\s'"]*/gi;

/** Secrets of the live connections, each with how many connections use it. */
const known = new Map<string, number>();
/** `known`'s scrubbable secrets, longest first (one secret may contain another). */
let scrubbed: string[] = [];

function updateScrubbed(): void {
  scrubbed = [...known.keys()]
    .filter((s) => s.length >= MIN_SCRUBBED_SECRET_LENGTH)
    .sort((a, b) => b.length - a.length);
}

/** The password of a URL string (and `password` query parameters); none when it is not a URL. */
function urlSecrets(text: string): string[] {
  if (!text.includes('://')) return [];
  try {
    const url = new URL(text);
    const found = [decodeURIComponent(url.password)];
    for (const [name, value] of url.searchParams) if (SECRET_KEY.test(name)) found.push(value);
    return found.filter((s) => s !== '');
  } catch {
    return [];
  }
}

function isPlain(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return Array.isArray(value) || proto === Object.prototype || proto === null;
}

function isError(value: object): value is Error {
  return value instanceof Error || types.isNativeError(value);
}

/**
 * Every credential in a connection option: URL passwords, and strings under a password key
 * (`password`, `sentinelPassword`, `redisOptions.password`, …) at any depth of plain objects
 * and arrays.
 */
function secretsIn(value: unknown, found: Set<string>, seen: Set<object>): void {
  if (typeof value === 'string') {
    for (const s of urlSecrets(value)) found.add(s);
    return;
  }
  if (typeof value !== 'object' || value === null || seen.has(value) || !isPlain(value)) return;
  seen.add(value);
  for (const [key, v] of Object.entries(value)) {
    if (typeof v === 'string' && v !== '' && SECRET_KEY.test(key)) found.add(v);
    else secretsIn(v, found, seen);
  }
}

/**
 * Registers the credentials found in `values` (connection options: URLs, ioredis options,
 * Cluster options, a client's `options`) so that `redactText` scrubs them from any text, until
 * the returned function is called (once per registration; a secret stays known while any
 * registration holds it).
 * @returns forget: unregisters them
 * @example
 * const forget = rememberSecrets([client.options]);
 * // … on close:
 * forget();
 */
export function rememberSecrets(values: readonly unknown[]): () => void {
  const found = new Set<string>();
  for (const value of values) secretsIn(value, found, new Set());
  for (const s of found) known.set(s, (known.get(s) ?? 0) + 1);
  updateScrubbed();
  let forgotten = false;
  return () => {
    if (forgotten) return;
    forgotten = true;
    for (const s of found) {
      const n = (known.get(s) ?? 1) - 1;
      if (n > 0) known.set(s, n);
      else known.delete(s);
    }
    updateScrubbed();
  };
}

/**
 * `text` without credentials: URL passwords (`redis://user:***@host`, `?password=***`) and every
 * occurrence of a registered secret (`rememberSecrets`) of at least
 * `MIN_SCRUBBED_SECRET_LENGTH` characters become `***`.
 * @example
 * redactText("got 'http://:Secret@host'") // "got 'http://:***@host'"
 */
export function redactText(text: string): string {
  let out = text.includes('://')
    ? text.replace(URL_PASSWORD, `$1:${REDACTED}@`).replace(QUERY_PASSWORD, `$1${REDACTED}`)
    : text;
  // Until none is left: a replacement can make another occurrence (of the same secret, e.g. one of
  // asterisks, or of a longer one). Each shortens the text (secrets are longer than `***`).
  for (let again = true; again;) {
    again = false;
    for (const secret of scrubbed) {
      if (!out.includes(secret)) continue;
      out = out.split(secret).join(REDACTED);
      again = true;
    }
  }
  return out;
}

/**
 * A string given as a connection URL that is not one we take (no scheme, `redis:/` with one
 * slash, `//`, another scheme): what may be its user info, after any `scheme:` and slashes and up
 * to the last `@`, and its password query parameters become `***`. `redactText` recognises a
 * password only in `scheme://user:password@`, and such a string was never connected, so its
 * password is not registered either.
 * @example
 * redactMalformedUrl('default:Secret@host:6379') // 'default:***@host:6379'
 * redactMalformedUrl('redis:/:Secret@host:6379') // 'redis:/***@host:6379'
 */
export function redactMalformedUrl(text: string): string {
  return text
    .replace(/^((?:[a-z][a-z0-9+.-]*:)?\/*)[^]*@/i, `$1${REDACTED}@`)
    .replace(QUERY_PASSWORD, `$1${REDACTED}`);
}

/** ioredis's `err.command` of an `AUTH` or `HELLO`: `{ name, args }`. */
function isAuthCommand(value: object): value is { name: string; args: unknown[] } {
  const { name, args } = value as { name?: unknown; args?: unknown };
  return typeof name === 'string' && /^(auth|hello)$/i.test(name) && Array.isArray(args);
}

/**
 * The arguments of `AUTH [user] password` or `HELLO protover AUTH user password …` with the
 * password replaced (the user name stays: it tells which account was refused).
 */
function authArgs(command: { name: string; args: unknown[] }): unknown[] {
  const { name, args } = command;
  let at = args.length - 1;
  if (!/^auth$/i.test(name)) {
    const auth = args.findIndex((a) => String(a).toUpperCase() === 'AUTH');
    at = auth < 0 ? -1 : auth + 2;
  }
  return at < 0 || at >= args.length || args[at] === REDACTED
    ? args
    : args.map((a, i) => (i === at ? REDACTED : a));
}

/** Own property values of an error, plain object or array (`stack` read even as an accessor). */
function entries(value: object): Array<[PropertyKey, unknown, PropertyDescriptor]> {
  return Reflect.ownKeys(value).map((key) => {
    const d = Object.getOwnPropertyDescriptor(value, key)!;
    return [key, 'value' in d || key !== 'stack' ? d.value : (value as Error).stack, d];
  });
}

/** Whether a property is a credential to replace whole (a string under a password key). */
function isSecretEntry(key: PropertyKey, v: unknown): boolean {
  return (
    typeof key === 'string' &&
    typeof v === 'string' &&
    v !== '' &&
    v !== REDACTED &&
    SECRET_KEY.test(key)
  );
}

/**
 * Whether `value` holds a credential anywhere. `copies`: objects being redacted, so that a cycle
 * back to one of them counts (the reference must go to the copy). Another class's instance (an
 * ioredis client: `options.password`) is looked into one level deep, through its own properties
 * and their plain objects, not into the instances it holds (a client's socket and queues).
 */
function holdsCredential(
  value: unknown,
  copies: Map<object, object>,
  seen: Set<object>,
  intoInstances = true,
): boolean {
  if (typeof value === 'string') return redactText(value) !== value;
  if (typeof value !== 'object' || value === null) return false;
  if (copies.has(value)) return true;
  const copyable = isError(value) || isPlain(value);
  if (seen.has(value) || (!copyable && !intoInstances)) return false;
  seen.add(value);
  if (isAuthCommand(value) && authArgs(value) !== value.args) return true;
  return entries(value).some(
    ([key, v]) =>
      isSecretEntry(key, v) || holdsCredential(v, copies, seen, copyable && intoInstances),
  );
}

/**
 * What stands for an instance of another class that holds a credential: it cannot be copied
 * without its behaviour, so only its class is shown.
 */
function placeholder(value: object): string {
  return `[${value.constructor?.name || 'object'} with credentials, redacted]`;
}

/** An object that holds a credential, without it: a copy, or a placeholder for an instance. */
function redactedValue(value: object, copies: Map<object, object>): unknown {
  return isError(value) || isPlain(value) ? redactedCopy(value, copies) : placeholder(value);
}

/** `value` (an error, plain object or array that holds a credential) copied without it. */
function redactedCopy(value: object, copies: Map<object, object>): object {
  const copy: object = Array.isArray(value) ? [] : Object.create(Object.getPrototypeOf(value));
  // Registered before the properties are copied, so that a cycle ends on the copy.
  copies.set(value, copy);
  for (const [key, v, d] of entries(value)) {
    if (!('value' in d) && key !== 'stack') {
      Object.defineProperty(copy, key, d);
      continue;
    }
    let redacted = v;
    if (key === 'args' && isAuthCommand(value)) redacted = authArgs(value);
    else if (isSecretEntry(key, v)) redacted = REDACTED;
    else if (typeof v === 'string') redacted = redactText(v);
    else if (typeof v === 'object' && v !== null && holdsCredential(v, copies, new Set())) {
      redacted = copies.get(v) ?? redactedValue(v, copies);
    }
    Object.defineProperty(copy, key, {
      value: redacted,
      writable: d.writable ?? true,
      enumerable: d.enumerable ?? false,
      configurable: d.configurable ?? true,
    });
  }
  return copy;
}

/**
 * `value` without credentials, at any depth: strings through `redactText`; errors (their
 * `message`, `stack`, `cause` and other own properties), plain objects and arrays are copied with
 * ioredis's `command.args` of `AUTH`/`HELLO` and strings under password keys redacted. A value
 * with nothing to redact is returned as is (the same object), and nothing is changed in place:
 * an ioredis error that carried the password is replaced by a redacted copy of the same class.
 * An instance of another class that holds a credential in its own properties (an ioredis client:
 * `options.password`) is replaced by a placeholder string naming its class; other instances are
 * kept as they are.
 * @example
 * new RedisCommandError(op, message, { cause: redactCredentials(err) })
 */
export function redactCredentials<T>(value: T): T {
  if (typeof value === 'string') return redactText(value) as T;
  const copies = new Map<object, object>();
  if (typeof value !== 'object' || value === null || !holdsCredential(value, copies, new Set())) {
    return value;
  }
  return redactedValue(value, copies) as T;
}
