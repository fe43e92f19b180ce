import { type ArgumentsHost, Catch, HttpStatus, Logger } from '@nestjs/common';
import { BaseExceptionFilter, HttpAdapterHost } from '@nestjs/core';
import { outageOf } from './outage';
import { SampleError, type SampleErrorKind } from './sample.error';

const STATUS: Record<SampleErrorKind, [status: number, error: string]> = {
  invalid: [HttpStatus.BAD_REQUEST, 'Bad Request'],
  'not-found': [HttpStatus.NOT_FOUND, 'Not Found'],
  conflict: [HttpStatus.CONFLICT, 'Conflict'],
  gone: [HttpStatus.GONE, 'Gone'],
  unavailable: [HttpStatus.SERVICE_UNAVAILABLE, 'Service Unavailable'],
};

/**
 * Answers the sample's `SampleError`s over HTTP: 400 invalid, 404 not found, 409 conflict,
 * 410 gone, 503 unavailable (with `Retry-After: 1`), with a JSON body
 * `{ statusCode, error, message, ...details }` shaped like Nest's own.
 * An error that says Redis or the database is out of reach (`outageOf`: a failover's MOVED or
 * CLUSTERDOWN, a timeout, a refused connection) is `503` with `Retry-After: 1`, never a 500.
 * Everything else goes to Nest's own handling (HttpExceptions as they are, the rest 500).
 * (A `LockTimeoutError`, `QueueFullError` or `RedisUnavailableError` never gets here: the
 * library's `LockInterceptor` turns them into 423 and 503.)
 */
@Catch()
export class SampleErrorFilter extends BaseExceptionFilter {
  private readonly logger = new Logger('SampleErrorFilter');
  private lastLog = 0;

  constructor(private readonly adapterHost: HttpAdapterHost) {
    super(adapterHost.httpAdapter);
  }

  override catch(err: unknown, host: ArgumentsHost): void {
    if (err instanceof SampleError) {
      const [statusCode, error] = STATUS[err.kind];
      const body = { statusCode, error, message: err.message, ...err.details };
      if (statusCode === 503) this.retryAfter(host);
      this.reply(host, body, statusCode);
      return;
    }
    const outage = outageOf(err);
    if (outage === undefined) {
      super.catch(err, host);
      return;
    }
    const message = `${outage} unavailable: ${(err as Error).message}`;
    // One line per 5 s at most: an outage fails every request.
    if (Date.now() - this.lastLog > 5_000) {
      this.lastLog = Date.now();
      this.logger.warn(`answered 503: ${message}`);
    }
    this.retryAfter(host);
    this.reply(host, { statusCode: 503, error: 'Service Unavailable', message }, 503);
  }

  private retryAfter(host: ArgumentsHost): void {
    this.adapterHost.httpAdapter.setHeader(host.switchToHttp().getResponse(), 'Retry-After', '1');
  }

  private reply(host: ArgumentsHost, body: object, status: number): void {
    this.adapterHost.httpAdapter.reply(host.switchToHttp().getResponse(), body, status);
  }
}
