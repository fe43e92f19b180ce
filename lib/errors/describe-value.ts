/** Renders a value for an error message: short, unambiguous, never throws. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') {
    return value.length > 80 ? `'${value.slice(0, 77)}...' (${value.length} chars)` : `'${value}'`;
  }
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return String(value);
  }
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'function') return `a function${value.name ? ` (${value.name})` : ''}`;
  if (typeof value === 'symbol') return value.toString();
  if (Array.isArray(value)) return `an array of ${value.length}`;
  return `an object (${Object.prototype.toString.call(value).slice(8, -1)})`;
}

/** How many items of a list an error message names; the others are only counted. */
export const LISTED_ITEMS = 5;

/**
 * The items of a list for an error message: the first `LISTED_ITEMS`, each through `describe`
 * (`describeValue` by default), then `… and N more`. A message stays short however long the list
 * (a multi-key lock may have thousands of names); the error keeps the whole list in a property.
 * @example
 * describeList(['a', 'b']) // "'a', 'b'"
 * describeList(names) // "'n0', 'n1', 'n2', 'n3', 'n4' … and 2995 more"
 */
export function describeList<T>(
  items: readonly T[],
  describe: (item: T) => string = describeValue,
): string {
  const listed = items.slice(0, LISTED_ITEMS).map((item) => describe(item));
  const more = items.length - listed.length;
  return more > 0 ? `${listed.join(', ')} … and ${more} more` : listed.join(', ');
}
