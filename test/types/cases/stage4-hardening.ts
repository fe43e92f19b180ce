// Type tests of what the hardening fixes added to public types (run by test/types/types.spec.ts):
// the `lock.lost` reason of a shutdown, a dashboard event's `keysTotal`, a bull-board 400, the
// 400 of a key value that cannot name a key.
// Every `@ts-expect-error` line must be an error. Nothing here runs.
import type {
  DashboardLockEvent,
  InvalidKeyValueResponseBody,
  LockLostEvent,
  RedisLockEvents,
} from 'nestjs-redis-lock';
import {
  createRedisLock,
  LockKeyError,
  LockKeyValueError,
  LockKeyValueInvalidError,
  RedisLockModule,
} from 'nestjs-redis-lock';
import { BullBoardActionError } from 'nestjs-redis-lock/bull-board';

/** A listener that handles every reason: the union is exhaustive. */
export function onLost(events: RedisLockEvents): void {
  events.on('lock.lost', (e: LockLostEvent) => {
    switch (e.reason) {
      case 'expired':
      case 'taken':
      case 'unreachable':
      case 'shutdown':
        return;
      default: {
        const never: never = e.reason;
        return never;
      }
    }
  });
}

// @ts-expect-error not a reason of lock.lost
export const notAReason: LockLostEvent['reason'] = 'released';

export function shownKeys(e: DashboardLockEvent): string {
  const more: number | undefined = e.keysTotal;
  return more === undefined ? e.keys.join(', ') : `${e.keys.join(', ')} … (${more} in all)`;
}

export const refused = new BullBoardActionError('add', 'unknown option', 400, {
  argument: 'options.jobId',
});
export const passedOn: unknown = BullBoardActionError.fromQueueError('add', new Error('down'));
// @ts-expect-error bull-board answers only 400, 405 or 409 for an action error
export const teapot = new BullBoardActionError('add', 'no', 418);

/** What a filter of its own reads from a key value the caller sent that cannot name a key. */
export function badKeyValue(err: unknown): InvalidKeyValueResponseBody | undefined {
  if (!(err instanceof LockKeyValueInvalidError)) return undefined;
  const asKeyError: LockKeyError = err;
  void asKeyError;
  const where: string = err.placeholder;
  const index: number = err.argument;
  const path: readonly string[] = err.path;
  void index;
  void path;
  return {
    statusCode: 400,
    error: 'Bad Request',
    message: `${where} ${err.reason}; the key '${err.template}' is built from it`,
    invalid: where,
  };
}

export const misnamed: InvalidKeyValueResponseBody = {
  statusCode: 400,
  error: 'Bad Request',
  message: '',
  // @ts-expect-error the body of an invalid value names it `invalid`, not `missing`
  missing: 'x',
};

/** Either key value error (missing or invalid) through their base: where the request carries it. */
export function keyValueAt(err: unknown): string | undefined {
  if (!(err instanceof LockKeyValueError)) return undefined;
  const method: string | undefined = err.method;
  return `${method ?? ''} ${err.template} ${err.placeholder}`;
}

/** `createRedisLock` takes the module's options object as it is, `isGlobal` included. */
export async function standaloneWithForRootOptions(): Promise<void> {
  const options = { redis: 'redis://localhost:6379', keyPrefix: 'shop:', isGlobal: true };
  RedisLockModule.forRoot(options);
  const redisLock = await createRedisLock(options);
  await redisLock.close();
  // @ts-expect-error isGlobal is a boolean
  await createRedisLock({ isGlobal: 'yes' });
}
