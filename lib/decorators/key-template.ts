import { LockKeyError } from '../errors/lock-key.error';
import { describeValue } from '../errors/describe-value';
import { LockKeyValueInvalidError } from '../errors/lock-key-value-invalid.error';
import {
  LockKeyValueMissingError,
  placeholderProblem,
} from '../errors/lock-key-value-missing.error';
import { MAX_KEY_BYTES } from '../lock/lock-keys';
import { LONE_SURROGATE, utf8BytesOver } from '../options/validate';

/** A `<N>` / `<N.path.to.field>` placeholder of a key template. */
export interface KeyPlaceholder {
  /** The argument index `N`. */
  readonly index: number;
  /** The field names after `N` (empty for `<N>`). */
  readonly path: readonly string[];
  /** The placeholder as written, e.g. `<0.from>`. */
  readonly text: string;
}

/** A parsed key template: literal text and placeholders, in order. */
export interface KeyTemplate {
  /** The template as written. */
  readonly source: string;
  /** Literal strings (with `<<` already turned into `<`) and placeholders. */
  readonly parts: ReadonlyArray<string | KeyPlaceholder>;
  /** The largest argument index a placeholder names; `-1` for a constant key. */
  readonly maxIndex: number;
}

const INDEX = '0|[1-9][0-9]*';
const SEGMENT = '[A-Za-z_$][A-Za-z0-9_$]*|0|[1-9][0-9]*';
const PLACEHOLDER = new RegExp(`^(${INDEX})((?:\\.(?:${SEGMENT}))*)$`);

/**
 * Parses a `@WithLock` key template: literal text plus `<N>` (the N-th argument) and
 * `<N.path.to.field>` (a field of it). `<<` stands for a literal `<`; `>` outside a placeholder
 * is literal. Throws `LockKeyError` naming the template for an empty template, an unclosed `<`,
 * or a placeholder that is not `N` or `N.path` (N a non-negative integer without leading zeros,
 * path segments identifiers or such integers).
 * @example
 * parseKeyTemplate('account:<0.from>') // parts: ['account:', { index: 0, path: ['from'] }]
 */
export function parseKeyTemplate(source: unknown): KeyTemplate {
  if (typeof source !== 'string') {
    throw new LockKeyError(`key template must be a string, got ${describeValue(source)}`, source);
  }
  if (source.length === 0) throw new LockKeyError('key template must not be empty', source);
  const parts: Array<string | KeyPlaceholder> = [];
  let literal = '';
  let maxIndex = -1;
  let at = 0;
  while (at < source.length) {
    const open = source.indexOf('<', at);
    if (open < 0) {
      literal += source.slice(at);
      break;
    }
    literal += source.slice(at, open);
    if (source[open + 1] === '<') {
      literal += '<';
      at = open + 2;
      continue;
    }
    const close = source.indexOf('>', open + 1);
    const nextOpen = source.indexOf('<', open + 1);
    if (close < 0 || (nextOpen >= 0 && nextOpen < close)) {
      throw new LockKeyError(
        `key template '${source}' has an unclosed '<' at position ${open} ` +
          `(write '<<' for a literal '<')`,
        source,
      );
    }
    const body = source.slice(open + 1, close);
    const match = PLACEHOLDER.exec(body);
    const index = match ? Number(match[1]) : NaN;
    if (!match || !Number.isSafeInteger(index)) {
      throw new LockKeyError(
        `key template '${source}' has an invalid placeholder '<${body}>' at position ${open}: ` +
          `expected <N> or <N.path.to.field> with N an argument index (0, 1, …); ` +
          `write '<<' for a literal '<'`,
        source,
      );
    }
    if (literal) parts.push(literal);
    literal = '';
    parts.push({ index, path: match[2] ? match[2].slice(1).split('.') : [], text: `<${body}>` });
    maxIndex = Math.max(maxIndex, index);
    at = close + 1;
  }
  if (literal) parts.push(literal);
  return { source, parts, maxIndex };
}

/**
 * Builds the lock key of `template` from a method's arguments. Each placeholder must resolve to a
 * non-empty string, a finite number, a bigint or a boolean. A missing value (`undefined`, `null`,
 * `''`, or a path through one) throws `LockKeyValueMissingError`; anything else (`NaN`, an object,
 * an array, a function, a symbol) throws `LockKeyError`; a value that makes the key longer than
 * `MAX_KEY_BYTES` or holds a lone surrogate throws `LockKeyValueInvalidError` (the longest value
 * is named when the key is too long); each names the template and the placeholder.
 */
export function renderKeyTemplate(template: KeyTemplate, args: readonly unknown[]): string {
  let key = '';
  let longest: { placeholder: KeyPlaceholder; length: number } | undefined;
  for (const part of template.parts) {
    if (typeof part === 'string') {
      key += part;
      continue;
    }
    const value = renderPlaceholder(template, part, args);
    if (LONE_SURROGATE.test(value)) {
      throw new LockKeyValueInvalidError(
        template.source,
        part,
        'is not well-formed Unicode (a lone surrogate)',
      );
    }
    if (!longest || value.length > longest.length) {
      longest = { placeholder: part, length: value.length };
    }
    key += value;
  }
  const bytes = utf8BytesOver(key, MAX_KEY_BYTES);
  if (bytes !== undefined && longest) {
    throw new LockKeyValueInvalidError(
      template.source,
      longest.placeholder,
      `makes the key ${bytes} bytes long; the limit is ${MAX_KEY_BYTES}`,
    );
  }
  return key;
}

function renderPlaceholder(
  template: KeyTemplate,
  placeholder: KeyPlaceholder,
  args: readonly unknown[],
): string {
  let value: unknown = args[placeholder.index];
  let reached = String(placeholder.index);
  for (const segment of placeholder.path) {
    if (value === null || value === undefined) break;
    value = (value as Record<string, unknown>)[segment];
    reached += `.${segment}`;
  }
  const scalar = scalarText(value);
  if (scalar !== undefined) return scalar;
  if (value === undefined || value === null || value === '') {
    throw new LockKeyValueMissingError(template.source, placeholder, reached, value);
  }
  throw new LockKeyError(
    placeholderProblem(template.source, placeholder.text, reached, value),
    template.source,
  );
}

/** The key text of an allowed scalar, or `undefined` when the value is not one. */
function scalarText(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return value.length > 0 ? value : undefined;
    case 'number':
      return Number.isFinite(value) ? String(value) : undefined;
    case 'bigint':
    case 'boolean':
      return String(value);
    default:
      return undefined;
  }
}
