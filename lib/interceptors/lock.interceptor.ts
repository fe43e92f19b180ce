import {
  CallHandler,
  ExecutionContext,
  HttpException,
  HttpStatus,
  Injectable,
  NestInterceptor,
} from '@nestjs/common';
import { catchError, isObservable, mergeMap, type Observable, of, throwError } from 'rxjs';
import { LockTimeoutError } from '../errors/lock-timeout.error';

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
 * `{ statusCode: 423, error: 'Locked', message, key }`. Every other error, and every error in
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
        throwError(() => (err instanceof LockTimeoutError ? locked(err, context) : err)),
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
