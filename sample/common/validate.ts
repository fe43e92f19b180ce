import { InvalidInputError } from './sample.error';

/** Ids in paths and bodies: 1 to 64 letters, digits, `.`, `_`, `:`, `-`, the first a letter or digit. */
const ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/** The request body as an object with only the `allowed` fields; throws `InvalidInputError`. */
export function requireObject(value: unknown, allowed: readonly string[]): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidInputError('body', value, 'a JSON object');
  }
  for (const field of Object.keys(value)) {
    if (!allowed.includes(field)) {
      throw new InvalidInputError(
        field,
        (value as Record<string, unknown>)[field],
        `absent (fields: ${allowed.join(', ')})`,
      );
    }
  }
  return value as Record<string, unknown>;
}

/** An id (sku, user, editor, task): 1 to 64 of `A-Z a-z 0-9 . _ : -`, the first a letter or digit. */
export function requireId(field: string, value: unknown): string {
  if (typeof value !== 'string' || !ID.test(value)) {
    throw new InvalidInputError(
      field,
      value,
      'an id of 1 to 64 letters, digits, ".", "_", ":" or "-" that starts with a letter or digit',
    );
  }
  return value;
}

/** An integer from `min` to `max`. */
export function requireInteger(field: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidInputError(field, value, `an integer from ${min} to ${max}`);
  }
  return value;
}

/** A finite number from `min` to `max`. */
export function requireNumber(field: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw new InvalidInputError(field, value, `a number from ${min} to ${max}`);
  }
  return value;
}
