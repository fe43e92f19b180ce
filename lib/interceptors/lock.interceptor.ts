import {
  CallHandler,
  ExecutionContext,
  HttpException,
  HttpStatus,
  Injectable,
  NestInterceptor,
} from '@nestjs/common';
import { catchError, isObservable, mergeMap, type Observable, of, throwError } from 'rxjs';
import { RedactingLogger } from '../redaction/redacting-logger';
import { LockKeyValueInvalidError } from '../errors/lock-key-value-invalid.error';
import type { LockKeyValueError } from '../errors/lock-key-value.error';
import { LockKeyValueMissingError } from '../errors/lock-key-value-missing.error';
import { LockQuorumError } from '../errors/lock-quorum.error';
import { LockReplicationError } from '../errors/lock-replication.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import { PassRequiredError } from '../errors/pass-required.error';
import { PayloadTooLargeError } from '../errors/payload-too-large.error';
import { QueueFullError } from '../errors/queue-full.error';
import { RateLimitedError } from '../errors/rate-limited.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import { ThrottledWarning } from '../redis/throttled-warning';

/** The JSON body of a `423 Locked` answer. */
export interface LockedResponseBody {
  statusCode: 423;
  error: 'Locked';
  /** The `LockTimeoutError` message: key, time waited, holder's remaining TTL. */
  message: string;
  /** The lock key that could not be had (the first one of a multi-key lock). */
  key: string;
}

/** The JSON body of a `400 Bad Request` for a lock key value missing from the request. */
export interface MissingKeyValueResponseBody {
  statusCode: 400;
  error: 'Bad Request';
  /** What is missing and which key (of a lock, semaphore, rate limit or pass) needs it. */
  message: string;
  /**
   * The missing value: where the request carries it (`'body.orderId'`, `'query.id'`,
   * `'params.sku'`, `'headers.x-tenant'`) when the handler's own `@WithLock` needs it and the
   * argument comes from `@Body`/`@Query`/`@Param`/`@Headers`, else the placeholder (`'<0.orderId>'`).
   */
  missing: string;
}

/**
 * The JSON body of a `400 Bad Request` for a key value of the request that cannot name a key (too
 * long, or not well-formed Unicode).
 */
export interface InvalidKeyValueResponseBody {
  statusCode: 400;
  error: 'Bad Request';
  /** What is wrong with the value and which key is built from it. */
  message: string;
  /** The value: where the request carries it (`'params.sku'`), as `missing` of a missing one. */
  invalid: string;
}

/** The JSON body of a `503 Service Unavailable` when Redis is out of reach. */
export interface RedisUnavailableResponseBody {
  statusCode: 503;
  error: 'Service Unavailable';
  /** `Redis unavailable (<operation>)`, e.g. `Redis unavailable (lock acquire)`; no client internals. */
  message: string;
}

/**
 * The HTTP side of `@WithLock`: when a handler (or anything it awaits) rejects with
 * `LockTimeoutError`, the client gets `423 Locked` with a `Retry-After` header (whole seconds
 * until the holder's lock expires, at least 1) and a JSON body
 * `{ statusCode: 423, error: 'Locked', message, key }`. When the lock's Redis is out of reach
 * (`RedisUnavailableError`, `LockQuorumError`, `LockReplicationError`) it answers
 * `503 Service Unavailable` with `Retry-After: 1` and
 * `{ statusCode: 503, error, message: 'Redis unavailable (<operation>)' }`: an outage, not
 * contention, and not a bug of the handler; the error's detail goes to the log (a warning at most
 * once per 5 s). A key value missing from the request (`LockKeyValueMissingError`) is
 * `400 Bad Request` with `{ statusCode: 400, error, message, missing }`; one that makes its key
 * too long or is not well-formed Unicode (`LockKeyValueInvalidError`) is `400` with
 * `{ statusCode: 400, error, message, invalid }`. A full queue
 * (`QueueFullError`, an `enqueue` past `maxSize`) is `503` with `Retry-After: 1` and
 * `{ statusCode: 503, error, message, queue }`: backpressure. A call over its rate limit
 * (`RateLimitedError`, from `@RateLimit`) is `429 Too Many Requests` with `Retry-After` (whole
 * seconds, rounded up) and `{ statusCode: 429, error, message, key, retryAfterMs }`. A payload past `maxPayloadBytes`
 * (`PayloadTooLargeError`, nothing was stored) is `413 Payload Too Large` with
 * `{ statusCode: 413, error, message, limit }`. A call without a waiting room pass
 * (`PassRequiredError`, from `@RequiresPass`) is `403 Forbidden` with
 * `{ statusCode: 403, error, message, room }`. Every other error (an
 * invalid template or key is a `LockKeyError`, a 500), and every error in non-HTTP contexts
 * (microservices, websockets), passes through unchanged. A handler result that
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
  private readonly outageWarning = new ThrottledWarning(new RedactingLogger(LockInterceptor.name));

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const result = next
      .handle()
      .pipe(mergeMap((value: unknown) => (isObservable(value) ? value : of(value))));
    if (context.getType() !== 'http') return result;
    return result.pipe(catchError((err: unknown) => throwError(() => this.toHttp(err, context))));
  }

  private toHttp(err: unknown, context: ExecutionContext): unknown {
    if (err instanceof LockTimeoutError) return locked(err, context);
    if (err instanceof QueueFullError) return queueFull(err, context);
    if (err instanceof RateLimitedError) return rateLimited(err, context);
    if (err instanceof PayloadTooLargeError) return payloadTooLarge(err);
    if (err instanceof PassRequiredError) return passRequired(err);
    if (err instanceof LockKeyValueMissingError) return missingValue(err, context);
    if (err instanceof LockKeyValueInvalidError) return invalidValue(err, context);
    if (!isOutage(err)) return err;
    const request = context.switchToHttp().getRequest<{ method?: string; url?: string } | null>();
    this.outageWarning.warn(
      `${request?.method ?? ''} ${request?.url ?? ''} answered 503: ${err.message}`.trim(),
    );
    return unavailable(err, context);
  }
}

/** Sets `Retry-After` on the response and builds the 423 exception for the exception filter. */
function locked(err: LockTimeoutError, context: ExecutionContext): HttpException {
  // The expected wait (line x recent hold time), else the holder's TTL: whole seconds, at least 1.
  const wait = err.expectedWaitMs ?? err.holderRemainingMs ?? 0;
  const retryAfter = Math.max(1, Math.ceil(wait / 1000));
  setHeader(context.switchToHttp().getResponse(), 'Retry-After', String(retryAfter));
  const body: LockedResponseBody = {
    statusCode: 423,
    error: 'Locked',
    message: err.message,
    key: err.key,
  };
  return new HttpException(body, HttpStatus.LOCKED, { cause: err });
}

function isOutage(
  err: unknown,
): err is RedisUnavailableError | LockQuorumError | LockReplicationError {
  return (
    err instanceof RedisUnavailableError ||
    err instanceof LockQuorumError ||
    err instanceof LockReplicationError
  );
}

/**
 * Builds the 503 for an error that says Redis (or a quorum of it) is out of reach: the body names
 * the operation only; the detail (ioredis' wording, node counts) is for the log.
 */
function unavailable(
  err: RedisUnavailableError | LockQuorumError | LockReplicationError,
  context: ExecutionContext,
): HttpException {
  setHeader(context.switchToHttp().getResponse(), 'Retry-After', '1');
  const operation = err instanceof RedisUnavailableError ? err.operation : `lock ${err.operation}`;
  return redisUnavailableException(operation, err);
}

/**
 * @internal the 503 of an outage of Redis during `operation`, whose body names the operation
 * only (`RedisUnavailableResponseBody`; the error, with ioredis' wording, is its `cause`): the
 * interceptor's and the dashboard's
 */
export function redisUnavailableException(operation: string, cause: unknown): HttpException {
  const body: RedisUnavailableResponseBody = {
    statusCode: 503,
    error: 'Service Unavailable',
    message: `Redis unavailable (${operation})`,
  };
  return new HttpException(body, HttpStatus.SERVICE_UNAVAILABLE, { cause });
}

/** The JSON body of a `503 Service Unavailable` for a full queue (`QueueFullError`). */
export interface QueueFullResponseBody {
  statusCode: 503;
  error: 'Service Unavailable';
  message: string;
  queue: string;
}

/**
 * Builds the 503 for a full queue: backpressure, not an outage (`Retry-After: 1`; the queue
 * drains as fast as its workers run, which the server cannot know).
 */
function queueFull(err: QueueFullError, context: ExecutionContext): HttpException {
  setHeader(context.switchToHttp().getResponse(), 'Retry-After', '1');
  const body: QueueFullResponseBody = {
    statusCode: 503,
    error: 'Service Unavailable',
    message: `queue '${err.queue}' is full; try again later`,
    queue: err.queue,
  };
  return new HttpException(body, HttpStatus.SERVICE_UNAVAILABLE, { cause: err });
}

/** The JSON body of a `429 Too Many Requests` (`RateLimitedError`). */
export interface RateLimitedResponseBody {
  statusCode: 429;
  error: 'Too Many Requests';
  message: string;
  /** The rate limit's key (its template filled in). */
  key: string;
  /** Ms until a call would be admitted. */
  retryAfterMs: number;
}

/** Sets `Retry-After` (whole seconds, rounded up) and builds the 429 of a rate limit. */
function rateLimited(err: RateLimitedError, context: ExecutionContext): HttpException {
  setHeader(
    context.switchToHttp().getResponse(),
    'Retry-After',
    String(Math.max(1, Math.ceil(err.retryAfterMs / 1000))),
  );
  const body: RateLimitedResponseBody = {
    statusCode: 429,
    error: 'Too Many Requests',
    message: err.message,
    key: err.key,
    retryAfterMs: err.retryAfterMs,
  };
  return new HttpException(body, HttpStatus.TOO_MANY_REQUESTS, { cause: err });
}

/** The JSON body of a `413 Payload Too Large` for a value past its bound (`PayloadTooLargeError`). */
export interface PayloadTooLargeResponseBody {
  statusCode: 413;
  error: 'Payload Too Large';
  message: string;
  /** The bound, in UTF-8 bytes of JSON text. */
  limit: number;
}

/** Builds the 413 for a payload (progress, log line, result) past its bound; nothing was stored. */
function payloadTooLarge(err: PayloadTooLargeError): HttpException {
  const body: PayloadTooLargeResponseBody = {
    statusCode: 413,
    error: 'Payload Too Large',
    message: `${err.argument ?? 'payload'} is ${err.bytes} bytes (UTF-8 JSON); the limit is ${err.limit} bytes`,
    limit: err.limit,
  };
  return new HttpException(body, HttpStatus.PAYLOAD_TOO_LARGE, { cause: err });
}

/** The JSON body of a `403 Forbidden` for a call without a waiting room pass (`PassRequiredError`). */
export interface PassRequiredResponseBody {
  statusCode: 403;
  error: 'Forbidden';
  /** Who has no pass of which room, and what to do. */
  message: string;
  /** The waiting room whose pass is required. */
  room: string;
}

/** Builds the 403 of `@RequiresPass`: the visitor must wait its turn in the room first. */
function passRequired(err: PassRequiredError): HttpException {
  const body: PassRequiredResponseBody = {
    statusCode: 403,
    error: 'Forbidden',
    message: err.message,
    room: err.room,
  };
  return new HttpException(body, HttpStatus.FORBIDDEN, { cause: err });
}

/** Builds the 400 for a lock key value the request did not carry. */
function missingValue(err: LockKeyValueMissingError, context: ExecutionContext): HttpException {
  const missing = requestLocation(err, context) ?? err.placeholder;
  const state = err.value === '' ? 'empty' : 'missing';
  const body: MissingKeyValueResponseBody = {
    statusCode: 400,
    error: 'Bad Request',
    message: `${missing} is ${state}; the key '${err.template}' needs it`,
    missing,
  };
  return new HttpException(body, HttpStatus.BAD_REQUEST, { cause: err });
}

/** Builds the 400 for a key value of the request that cannot name a key. */
function invalidValue(err: LockKeyValueInvalidError, context: ExecutionContext): HttpException {
  const invalid = requestLocation(err, context) ?? err.placeholder;
  const body: InvalidKeyValueResponseBody = {
    statusCode: 400,
    error: 'Bad Request',
    message: `${invalid} ${err.reason}; the key '${err.template}' is built from it`,
    invalid,
  };
  return new HttpException(body, HttpStatus.BAD_REQUEST, { cause: err });
}

/** Nest's metadata of a handler's parameter decorators (`@Body()`, `@Param('id')`, …). */
const ROUTE_ARGS_METADATA = '__routeArguments__';
/** Nest's `RouteParamtypes` of the decorators whose values come from the request, by name. */
const REQUEST_PARTS: Record<string, string> = { 3: 'body', 4: 'query', 5: 'params', 6: 'headers' };

/**
 * Where the request carries the missing value (`body.orderId`), when the error comes from the
 * handler's own `@WithLock` and the argument has a `@Body`/`@Query`/`@Param`/`@Headers` decorator.
 */
function requestLocation(err: LockKeyValueError, context: ExecutionContext): string | undefined {
  const handler = context.getHandler();
  if (err.method !== `${context.getClass().name}.${handler.name}`) return undefined;
  const args: unknown = Reflect.getMetadata(ROUTE_ARGS_METADATA, context.getClass(), handler.name);
  for (const [key, param] of Object.entries(
    (args ?? {}) as Record<string, { index?: unknown; data?: unknown }>,
  )) {
    const part = REQUEST_PARTS[key.split(':')[0]];
    if (!part || param.index !== err.argument) continue;
    const data = typeof param.data === 'string' && param.data ? [param.data] : [];
    return [part, ...data, ...err.path].join('.');
  }
  return undefined;
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
