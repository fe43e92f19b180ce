import { type KeyValuePlaceholder, LockKeyValueError } from './lock-key-value.error';

/**
 * A decorator's key (`@WithLock`, `@WithSemaphore`, `@RateLimit`, `@RequiresPass`) built from the
 * call's arguments cannot name a key: a value makes it longer than 512 bytes, or holds a lone
 * UTF-16 surrogate (not well-formed Unicode). The value is the caller's, not the template's: over
 * HTTP, `LockInterceptor` answers `400 Bad Request` naming it (`invalid`), as it does for a
 * missing one (`LockKeyValueMissingError`).
 */
export class LockKeyValueInvalidError extends LockKeyValueError {
  /**
   * @param template the key template, e.g. `'stock:<0.sku>'`
   * @param placeholder the placeholder whose value is not usable
   * @param reason what is wrong with it, e.g. `makes the key 606 bytes long; the limit is 512`
   * @param method `Class.method` of the decorated method, when known
   * @param decorator the decorator whose key it is, for the message
   */
  constructor(
    template: string,
    placeholder: KeyValuePlaceholder,
    readonly reason: string,
    method?: string,
    decorator = '@WithLock',
  ) {
    const problem = `key template '${template}': ${placeholder.text} ${reason}`;
    super(template, placeholder, problem, method, decorator);
  }

  inMethod(method: string, decorator = '@WithLock'): LockKeyValueInvalidError {
    return new LockKeyValueInvalidError(
      this.template,
      this.placeholderParts,
      this.reason,
      method,
      decorator,
    );
  }
}
