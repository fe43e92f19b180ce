/**
 * True when Redis would hash `key` by a `{tag}` inside it: the first `{` followed later by a `}`
 * with at least one character between them.
 */
export function hasHashTag(key: string): boolean {
  const open = key.indexOf('{');
  if (open < 0) return false;
  const close = key.indexOf('}', open + 1);
  return close > open + 1;
}

/**
 * The base key of a lock, queue or fenced resource: `<prefix><kind>:{<name>}`, or
 * `<prefix><kind>:<name>` when the name already has a `{tag}` — so that every key derived from it
 * (by appending suffixes) shares one hash tag, hence one Cluster slot, and names sharing a tag
 * share a slot too.
 */
export function taggedKey(prefix: string, kind: string, name: string): string {
  return `${prefix}${kind}:${hasHashTag(name) ? name : `{${name}}`}`;
}
