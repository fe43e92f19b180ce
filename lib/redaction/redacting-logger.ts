import { Logger } from '@nestjs/common';
import { redactCredentials } from './redact-credentials';

/**
 * The Nest `Logger` of every class of this library: what it is asked to print (messages, stacks,
 * objects) goes through `redactCredentials` first, so a log line never shows a URL's password, an
 * `AUTH`/`HELLO` argument or a configured password, also when it quotes an error a task handler
 * threw. Output, levels and contexts are those of `Logger` (the application's logger, if set).
 * @example
 * private readonly logger = new RedactingLogger('LockService');
 */
export class RedactingLogger extends Logger {}

for (const level of ['log', 'error', 'warn', 'debug', 'verbose', 'fatal'] as const) {
  Object.defineProperty(RedactingLogger.prototype, level, {
    // `Logger.prototype[level]` is looked up at each call, not once here, so that whatever
    // replaces it later (a test's spy, an APM's wrapper) still sees every line.
    value(this: Logger, ...args: unknown[]): void {
      (Logger.prototype[level] as (...a: unknown[]) => void).apply(
        this,
        args.map(redactCredentials),
      );
    },
    writable: true,
    configurable: true,
  });
}
