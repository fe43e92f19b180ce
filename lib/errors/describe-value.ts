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
