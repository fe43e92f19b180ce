import { LockKeyError } from './lock-key.error';

/** A placeholder of a key template: `<N>` / `<N.path>` (lib/decorators/key-template.ts). */
export interface KeyValuePlaceholder {
  readonly index: number;
  readonly path: readonly string[];
  readonly text: string;
}

/**
 * A value of the call's arguments that cannot fill a decorator's key template (`@WithLock`,
 * `@WithSemaphore`, `@RateLimit`, `@RequiresPass`): missing (`LockKeyValueMissingError`) or
 * unusable as part of a key (`LockKeyValueInvalidError`). The caller's mistake, not the
 * template's: over HTTP, `LockInterceptor` answers `400 Bad Request` naming where the request
 * carries the value.
 */
export abstract class LockKeyValueError extends LockKeyError {
  /** The placeholder as written, e.g. `<0.orderId>`. */
  readonly placeholder: string;
  /** The argument index of the placeholder (`0` for `<0.orderId>`). */
  readonly argument: number;
  /** The field path of the placeholder (`['orderId']` for `<0.orderId>`). */
  readonly path: readonly string[];

  /**
   * @param template the key template, e.g. `'payment:<0.orderId>'`
   * @param placeholder the placeholder whose value it is
   * @param problem the message, after `<decorator> on <method>: ` when the method is known
   * @param method `Class.method` of the decorated method, when known
   * @param decorator the decorator whose key it is
   */
  protected constructor(
    readonly template: string,
    placeholder: KeyValuePlaceholder,
    problem: string,
    readonly method?: string,
    decorator = '@WithLock',
  ) {
    super((method ? `${decorator} on ${method}: ` : '') + problem, template);
    this.placeholder = placeholder.text;
    this.argument = placeholder.index;
    this.path = placeholder.path;
  }

  /** The placeholder, as the constructors take it. */
  protected get placeholderParts(): KeyValuePlaceholder {
    return { index: this.argument, path: this.path, text: this.placeholder };
  }

  /** The same error, naming the decorated method and its decorator. */
  abstract inMethod(method: string, decorator?: string): LockKeyValueError;
}
