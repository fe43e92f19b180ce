import { LockKeyError } from './lock-key.error';

/**
 * A decorator's key (`@WithLock`, `@WithSemaphore`, `@RateLimit`, `@RequiresPass`) built from the
 * call's arguments cannot name a key: a value makes it longer than 512 bytes, or holds a lone
 * UTF-16 surrogate (not well-formed Unicode). The value is the caller's, not the template's: over
 * HTTP, `LockInterceptor` answers `400 Bad Request` naming it (`invalid`), as it does for a
 * missing one (`LockKeyValueMissingError`).
 */
export class LockKeyValueInvalidError extends LockKeyError {
  /** The placeholder as written, e.g. `<0.sku>`. */
  readonly placeholder: string;
  /** The argument index of the placeholder (`0` for `<0.sku>`). */
  readonly argument: number;
  /** The field path of the placeholder (`['sku']` for `<0.sku>`). */
  readonly path: readonly string[];

  /**
   * @param template the key template, e.g. `'stock:<0.sku>'`
   * @param placeholder the placeholder whose value is not usable
   * @param reason what is wrong with it, e.g. `makes the key 606 bytes long; the limit is 512`
   * @param method `Class.method` of the decorated method, when known
   * @param decorator the decorator whose key it is, for the message
   */
  constructor(
    readonly template: string,
    placeholder: {
      readonly index: number;
      readonly path: readonly string[];
      readonly text: string;
    },
    readonly reason: string,
    readonly method?: string,
    decorator = '@WithLock',
  ) {
    super(
      `${method ? `${decorator} on ${method}: ` : ''}key template '${template}': ` +
        `${placeholder.text} ${reason}`,
      template,
    );
    this.placeholder = placeholder.text;
    this.argument = placeholder.index;
    this.path = placeholder.path;
  }

  /** The same error, naming the decorated method and its decorator. */
  inMethod(method: string, decorator = '@WithLock'): LockKeyValueInvalidError {
    const placeholder = { index: this.argument, path: this.path, text: this.placeholder };
    return new LockKeyValueInvalidError(this.template, placeholder, this.reason, method, decorator);
  }
}
