import { type ArgumentsHost, Catch, type ExceptionFilter, HttpStatus } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { SampleError, type SampleErrorKind } from './sample.error';

const STATUS: Record<SampleErrorKind, [status: number, error: string]> = {
  invalid: [HttpStatus.BAD_REQUEST, 'Bad Request'],
  'not-found': [HttpStatus.NOT_FOUND, 'Not Found'],
  conflict: [HttpStatus.CONFLICT, 'Conflict'],
  gone: [HttpStatus.GONE, 'Gone'],
};

/**
 * Answers the sample's `SampleError`s over HTTP: 400 invalid, 404 not found, 409 conflict,
 * 410 gone, with a JSON body `{ statusCode, error, message, ...details }` shaped like Nest's own.
 * (A `LockTimeoutError` never gets here: the library's `LockInterceptor` turns it into a 423.)
 */
@Catch(SampleError)
export class SampleErrorFilter implements ExceptionFilter<SampleError> {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(err: SampleError, host: ArgumentsHost): void {
    const [statusCode, error] = STATUS[err.kind];
    const body = { statusCode, error, message: err.message, ...err.details };
    this.adapterHost.httpAdapter.reply(host.switchToHttp().getResponse(), body, statusCode);
  }
}
