import { PassRequiredError } from '../errors/pass-required.error';
import { checkKeyName } from '../lock/lock-keys';
import type { LockService } from '../lock/lock.service';
import type { WaitingRoomService } from '../waiting-room/waiting-room.service';
import { checkBeforeCall } from './checked-call';
import { moduleServiceOf } from './lock-service.registry';
import { decoratedMethod, replaceMethod } from './method-wrapper';
import { compileSingleKey, type KeyedMethodDecorator, type LockKeyFunction } from './with-lock-key';

/** @internal The WaitingRoomService of each running module, by the LockService beside it. */
export const waitingRoomServices = new WeakMap<LockService, WaitingRoomService>();

/**
 * Lets a call run only for a visitor holding a valid pass of waiting room `room`
 * (`WaitingRoomService.hasPass`): without one it rejects with `PassRequiredError` before the
 * method runs (`403 Forbidden` over HTTP with `LockInterceptor`). `visitor` names the visitor
 * from the method's arguments, with the rules of `@WithLock` keys (template `'<1.userId>'`, or a
 * function of the arguments); it is checked when the class is defined. Write it above
 * `@WithLock`/`@WithSemaphore` (the pass is checked first) and below `@RateLimit`.
 * @param room the waiting room's name
 * @param visitor template or `(...args) => string`: the visitor id
 * @example
 * ```ts
 * @Post(':sku/buy')
 * @RequiresPass('sale', '<1.userId>')
 * async buy(@Param('sku') sku: string, @Body() body: BuyDto) { … }
 * ```
 */
export function RequiresPass<A extends unknown[]>(
  room: string,
  visitor: (...args: A) => string,
): KeyedMethodDecorator<A>;
export function RequiresPass(room: string, visitor: string): MethodDecorator;
export function RequiresPass(room: string, visitor: string | LockKeyFunction): MethodDecorator {
  const roomName = checkKeyName(room, 'waiting room name');
  return <T>(
    target: object,
    propertyKey: string | symbol,
    descriptor: TypedPropertyDescriptor<T>,
  ): TypedPropertyDescriptor<T> => {
    const method = decoratedMethod('@RequiresPass', target, propertyKey, descriptor);
    const { original, where } = method;
    const visitorOf = compileSingleKey(
      visitor,
      '@RequiresPass',
      'a visitor',
      method,
      target,
      propertyKey,
    );
    const check = async (self: unknown, args: unknown[]): Promise<void> => {
      const id = visitorOf(self, args);
      const rooms = moduleServiceOf(
        waitingRoomServices,
        '@RequiresPass',
        'WaitingRoomService',
        where,
        self,
      );
      if (!(await rooms.hasPass(roomName, id))) throw new PassRequiredError(roomName, id);
    };
    const wrapper = checkBeforeCall(target, propertyKey, original, check);
    return replaceMethod(target, propertyKey, descriptor, original, wrapper);
  };
}
