import { redactCredentials, redactText } from '../redaction/redact-credentials';

/**
 * Base class of every error this library throws. Catch it to handle all of them at once;
 * each failure has its own subclass with `name` set to the class name. Never carries a
 * credential: the message (so the stack) and the `cause` chain are redacted (`***`) of URL
 * passwords, ioredis's `AUTH`/`HELLO` arguments and the configured passwords (README,
 * "Errors").
 */
export class RedisLockError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(
      redactText(message),
      options && 'cause' in options ? { cause: redactCredentials(options.cause) } : options,
    );
    this.name = new.target.name;
  }
}
