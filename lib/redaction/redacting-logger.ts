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
export class RedactingLogger extends Logger {
  override log(message: unknown, ...rest: unknown[]): void {
    super.log(redactCredentials(message), ...rest.map(redactCredentials));
  }

  override error(message: unknown, ...rest: unknown[]): void {
    super.error(redactCredentials(message), ...rest.map(redactCredentials));
  }

  override warn(message: unknown, ...rest: unknown[]): void {
    super.warn(redactCredentials(message), ...rest.map(redactCredentials));
  }

  override debug(message: unknown, ...rest: unknown[]): void {
    super.debug(redactCredentials(message), ...rest.map(redactCredentials));
  }

  override verbose(message: unknown, ...rest: unknown[]): void {
    super.verbose(redactCredentials(message), ...rest.map(redactCredentials));
  }

  override fatal(message: unknown, ...rest: unknown[]): void {
    super.fatal(redactCredentials(message), ...rest.map(redactCredentials));
  }
}
