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
 * A client error raised before the handler (body-parser's 413 for a body over its limit, 400
 * for malformed JSON) keeps its status and message and is not logged as an error.
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
    const client = clientErrorOf(err);
    if (client) {
      // The client's own mistake (a body over the size limit, malformed JSON): its status, and
      // no error log with a stack for each one.
      this.reply(host, client, client.statusCode);
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

/**
 * The reply for an error that `http-errors` made for the client (body-parser's: `expose` set,
 * a 4xx `status`), or undefined for any other error.
 */
function clientErrorOf(
  err: unknown,
): { statusCode: number; error: string; message: string } | undefined {
  const e = err as { status?: unknown; expose?: unknown; message?: unknown; name?: unknown };
  if (typeof err !== 'object' || err === null || e.expose !== true) return undefined;
  if (typeof e.status !== 'number' || e.status < 400 || e.status > 499) return undefined;
  const error =
    typeof e.name === 'string'
      ? e.name.replace(/Error$/, '').replace(/(?<=[a-z])(?=[A-Z])/g, ' ')
      : 'Bad Request';
  return { statusCode: e.status, error, message: String(e.message) };
}
