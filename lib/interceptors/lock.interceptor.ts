import {
  CallHandler,
  ExecutionContext,
  HttpException,
  HttpStatus,
  Injectable,
  NestInterceptor,
} from '@nestjs/common';
import { catchError, isObservable, mergeMap, type Observable, of, throwError } from 'rxjs';
import { LockQuorumError } from '../errors/lock-quorum.error';
import { LockReplicationError } from '../errors/lock-replication.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';

/** The JSON body of a `423 Locked` answer. */
export interface LockedResponseBody {
  statusCode: 423;
  error: 'Locked';
  /** The `LockTimeoutError` message: key, time waited, holder's remaining TTL. */
  message: string;
  /** The lock key that could not be had (the first one of a multi-key lock). */
  key: string;
}

/**
 * The HTTP side of `@WithLock`: when a handler (or anything it awaits) rejects with
 * `LockTimeoutError`, the client gets `423 Locked` with a `Retry-After` header (whole seconds
 * until the holder's lock expires, at least 1) and a JSON body
 * `{ statusCode: 423, error: 'Locked', message, key }`. When the lock's Redis is out of reach
 * (`RedisUnavailableError`, `LockQuorumError`, `LockReplicationError`) it answers
 * `503 Service Unavailable` with `Retry-After: 1` and `{ statusCode: 503, error, message }`: an
 * outage, not contention, and not a bug of the handler. Every other error, and every error in
 * non-HTTP contexts (microservices, websockets), passes through unchanged. A handler result that
 * is a Promise of an Observable is flattened, so that the stream's lifetime drives the lock.
 *
 * It is provided and exported by `RedisLockModule`.
 * @example
 * // globally
 * providers: [{ provide: APP_INTERCEPTOR, useClass: LockInterceptor }]
 * // or: app.useGlobalInterceptors(app.get(LockInterceptor));
 * // or per controller / handler
 * \@UseInterceptors(LockInterceptor)
 */
@Injectable()
export class LockInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const result = next
      .handle()
      .pipe(mergeMap((value: unknown) => (isObservable(value) ? value : of(value))));
    if (context.getType() !== 'http') return result;
    return result.pipe(
      catchError((err: unknown) =>
        throwError(() =>
          err instanceof LockTimeoutError
            ? locked(err, context)
            : isOutage(err)
              ? unavailable(err, context)
              : err,
        ),
      ),
    );
  }
}

/** Sets `Retry-After` on the response and builds the 423 exception for the exception filter. */
function locked(err: LockTimeoutError, context: ExecutionContext): HttpException {
  const retryAfter = Math.max(1, Math.ceil((err.holderRemainingMs ?? 0) / 1000));
  setHeader(context.switchToHttp().getResponse(), 'Retry-After', String(retryAfter));
  const body: LockedResponseBody = {
    statusCode: 423,
    error: 'Locked',
    message: err.message,
    key: err.key,
  };
  return new HttpException(body, HttpStatus.LOCKED, { cause: err });
}

function isOutage(err: unknown): err is Error {
  return (
    err instanceof RedisUnavailableError ||
    err instanceof LockQuorumError ||
    err instanceof LockReplicationError
  );
}

/** Builds the 503 for an error that says Redis (or a quorum of it) is out of reach. */
function unavailable(err: Error, context: ExecutionContext): HttpException {
  setHeader(context.switchToHttp().getResponse(), 'Retry-After', '1');
  return new HttpException(
    { statusCode: 503, error: 'Service Unavailable', message: err.message },
    HttpStatus.SERVICE_UNAVAILABLE,
    { cause: err },
  );
}

/** Express responses and Fastify replies both have `header(name, value)`; raw Node ones `setHeader`. */
function setHeader(response: unknown, name: string, value: string): void {
  const res = response as {
    headersSent?: boolean;
    sent?: boolean;
    header?: (name: string, value: string) => unknown;
    setHeader?: (name: string, value: string) => unknown;
  } | null;
  if (!res || res.headersSent || res.sent) return;
  if (typeof res.header === 'function') res.header(name, value);
  else if (typeof res.setHeader === 'function') res.setHeader(name, value);
}
