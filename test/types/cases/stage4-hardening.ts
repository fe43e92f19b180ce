// Type tests of what the hardening fixes added to public types (run by test/types/types.spec.ts):
// the `lock.lost` reason of a shutdown, a dashboard event's `keysTotal`, a bull-board 400.
// Every `@ts-expect-error` line must be an error. Nothing here runs.
import type { DashboardLockEvent, LockLostEvent, RedisLockEvents } from 'nestjs-redis-lock';
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
