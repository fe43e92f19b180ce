import { defer, mergeMap, type Observable } from 'rxjs';
import { isObservableType } from './with-lock.decorator';

/**
 * @internal The wrapper of a method that runs `check` (which rejects to refuse the call) before
 * the method: for a method declared to return an Observable, on each subscription; else before
 * each call, the wrapper returning a Promise.
 */
export function checkBeforeCall(
  target: object,
  propertyKey: string | symbol,
  original: (...args: unknown[]) => unknown,
  check: (self: unknown, args: unknown[]) => Promise<void>,
): (...args: unknown[]) => unknown {
  return isObservableType(Reflect.getMetadata('design:returntype', target, propertyKey))
    ? function (this: unknown, ...args: unknown[]): Observable<unknown> {
        return defer(() => check(this, args)).pipe(
          mergeMap(() => original.apply(this, args) as Observable<unknown>),
        );
      }
    : async function (this: unknown, ...args: unknown[]) {
        await check(this, args);
        return original.apply(this, args);
      };
}
