/**
 * True when Redis would hash `key` by a `{tag}` inside it: the first `{` followed later by a `}`
 * with at least one character between them.
 */
export function hasHashTag(key: string): boolean {
  return hashTagOf(key) !== undefined;
}

/**
 * The hash tag Redis hashes `key` by (see `hasHashTag`), or `undefined` when it hashes the whole
 * key.
 * @example
 * ```ts
 * hashTagOf('lock:{order:42}:fence'); // 'order:42'
 * ```
 */
export function hashTagOf(key: string): string | undefined {
  const open = key.indexOf('{');
  const close = open < 0 ? -1 : key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}

/**
 * The part of a key that stands for the caller's `name`, in one of three shapes, told apart by
 * their last two characters:
 *
 * - a name without braces: `{<name>}` (the name is the hash tag);
 * - a name with its own `{tag}`: `<name>{}` (Redis hashes by the caller's tag);
 * - a name with braces that are no tag (`'a}b'`, `'{}'`, `'x{'`): `{<name, braces as _>}<name>}}`.
 *
 * Every shape ends in `}` and no internal suffix (`:fence`, `:line`, `:due`, …) contains one, so a
 * key built from one name plus a suffix can never equal a key built from another name: the
 * last `}` of the key marks where the name's part ends. And the encoding is one-to-one, so `'x'`
 * (`{x}`) and `'{x}'` (`{x}{}`) are different objects. Every key of one name has one hash tag,
 * so one Cluster slot.
 * @example
 * ```ts
 * encodeKeyName('order:42'); // '{order:42}': a name without braces keeps its old key
 * encodeKeyName('{order:42}:stock'); // '{order:42}:stock{}'
 * encodeKeyName('a}b'); // '{a_b}a}b}}'
 * ```
 */
export function encodeKeyName(name: string): string {
  if (!/[{}]/.test(name)) return `{${name}}`;
  if (hasHashTag(name)) return `${name}{}`;
  return `{${name.replace(/[{}]/g, '_')}}${name}}}`;
}

/**
 * The inverse of `encodeKeyName`: the name whose key part is `part`, or `undefined` when no name
 * has that key part (a key this library did not write, or a suffixed one such as `…:fence`).
 * @example
 * ```ts
 * decodeKeyName('{order:42}:stock{}'); // '{order:42}:stock'
 * decodeKeyName('{order:42}:fence'); // undefined
 * ```
 */
export function decodeKeyName(part: string): string | undefined {
  const name = part.endsWith('{}')
    ? part.slice(0, -2)
    : part.endsWith('}}')
      ? part.slice(part.length / 2, -2)
      : part.slice(1, -1);
  return name.length > 0 && encodeKeyName(name) === part ? name : undefined;
}

/**
 * The base key of a lock, semaphore, queue, fenced resource or tick job:
 * `<prefix><kind>:<encodeKeyName(name)>` — every key derived from it (by appending `:<suffix>`)
 * shares its hash tag, hence its Cluster slot, and names sharing a `{tag}` share a slot too.
 */
export function taggedKey(prefix: string, kind: string, name: string): string {
  return `${prefix}${kind}:${encodeKeyName(name)}`;
}
