import { describeValue } from './describe-value';
import { type KeyValuePlaceholder, LockKeyValueError } from './lock-key-value.error';

/**
 * A `@WithLock` key template could not be filled at call time because a value is missing from the
 * method's arguments: the argument, or a field on the placeholder's path, is `undefined` or
 * `null`, or the value is an empty string. This is the caller's mistake, not the template's: over
 * HTTP, `LockInterceptor` answers `400 Bad Request` naming the missing value. A value that is
 * present but cannot be part of a key (an object, an array, `NaN`, a function) stays a plain
 * `LockKeyError`, a programming error (HTTP 500), like an invalid template or a key function's
 * bad result; a string that makes the key too long or is not well-formed Unicode is the caller's
 * (`LockKeyValueInvalidError`, HTTP 400).
 */
export class LockKeyValueMissingError extends LockKeyValueError {
  /**
   * @param template the key template, e.g. `'payment:<0.orderId>'`
   * @param placeholder the placeholder that could not be filled
   * @param reached how far the path could be read, e.g. `'0'` when argument 0 itself is missing
   * @param value what was found there: `undefined`, `null` or `''`
   * @param method `Class.method` of the decorated method, when known
   * @param decorator the decorator whose key it is (`'@WithSemaphore'`), for the message
   */
  constructor(
    template: string,
    placeholder: KeyValuePlaceholder,
    readonly reached: string,
    readonly value: unknown,
    method?: string,
    decorator = '@WithLock',
  ) {
    const problem = placeholderProblem(template, placeholder.text, reached, value);
    super(template, placeholder, problem, method, decorator);
  }

  inMethod(method: string, decorator = '@WithLock'): LockKeyValueMissingError {
    return new LockKeyValueMissingError(
      this.template,
      this.placeholderParts,
      this.reached,
      this.value,
      method,
      decorator,
    );
  }
}

/**
 * Why `placeholder` of `template` cannot be filled: `value` is what was found at `<reached>`.
 * @example
 * placeholderProblem('pay:<0.id>', '<0.id>', '0', undefined)
 * // "key template 'pay:<0.id>': <0.id> cannot be read: <0> is undefined; expected …"
 */
export function placeholderProblem(
  template: string,
  placeholder: string,
  reached: string,
  value: unknown,
): string {
  const what =
    reached === placeholder.slice(1, -1)
      ? `${placeholder} is ${describeValue(value)}`
      : `${placeholder} cannot be read: <${reached}> is ${describeValue(value)}`;
  return (
    `key template '${template}': ${what}; ` +
    'expected a non-empty string, a finite number, a bigint or a boolean'
  );
}
