import type { RedactingLogger } from '../redaction/redacting-logger';
/**
 * Logs a warning at most once per `everyMs`: a Redis outage makes reconnect loops and retries fail
 * many times a second, and one line per interval is enough to see it.
 */
export class ThrottledWarning {
  private last = 0;

  constructor(
    private readonly logger: RedactingLogger,
    private readonly everyMs = 5_000,
  ) {}

  warn(message: string): void {
    const now = Date.now();
    if (now - this.last < this.everyMs) return;
    this.last = now;
    this.logger.warn(message);
  }
}
